package tool

import "encoding/json"

// The scanners below assume valid JSON (checked with json.Valid first).

func skipWS(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

func scanNumber(data []byte, i int) (end int, integer bool) {
	integer = true
	for ; i < len(data); i++ {
		switch c := data[i]; {
		case c == '.' || c == 'e' || c == 'E':
			integer = false
		case c == '-' || c == '+' || c >= '0' && c <= '9':
		default:
			return i, integer
		}
	}
	return i, integer
}

func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = skipString(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	case 't', 'n':
		return i + 4
	case 'f':
		return i + 5
	}
	end, _ := scanNumber(data, i)
	return end
}

func unquote(raw []byte) string {
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		return string(raw)
	}
	return s
}

// typeOf names the JSON type of the value that starts with c.
func typeOf(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
