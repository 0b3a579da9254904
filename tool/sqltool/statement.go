package sqltool

import (
	"fmt"
	"strings"

	"github.com/agentry/agentry/tool"
)

// A token of SQL text, as far as the statement check needs to tell
// them apart: words (keywords and bare names), quoted names, literals
// (strings, numbers, parameters) and single punctuation characters.
// Comments and whitespace are dropped.
type token struct {
	kind byte // 'w' word, 'q' quoted name, 'l' literal, 'p' punctuation
	text string
}

// readKinds are the statement kinds sql_query runs: those that read.
// SHOW and TABLE are Postgres's.
var readKinds = map[string]bool{"select": true, "with": true, "values": true, "explain": true}
var pgReadKinds = map[string]bool{"show": true, "table": true}

// writeWords are refused anywhere in a sql_query statement: a
// data-modifying CTE (WITH d AS (DELETE …) SELECT …), SELECT … INTO,
// EXPLAIN ANALYZE of a write, and what reaches outside the database.
var writeWords = wordSet("insert update delete merge upsert into copy attach detach pragma create drop alter " +
	"truncate grant revoke vacuum reindex execute call lock listen notify load")

// outsideWords are refused in sql_exec too: they read or write files,
// run programs on the database host, or change the server itself.
var outsideWords = wordSet("copy attach detach pragma load")

// deniedFuncs are functions neither tool calls: they run programs or
// SQL given as text, read or write the server's files, reload or signal
// the server, or hold locks beyond the call. Matched on the name alone
// (any schema, any case).
var deniedFuncs = wordSet("pg_reload_conf pg_rotate_logfile pg_terminate_backend pg_cancel_backend pg_read_file " +
	"pg_read_binary_file pg_stat_file pg_promote pg_switch_wal pg_drop_replication_slot pg_start_backup pg_stop_backup " +
	"pg_notify set_config query_to_xml query_to_xmlschema query_to_xml_and_xmlschema cursor_to_xml cursor_to_xmlschema " +
	"ts_stat load_extension readfile writefile edit fts3_tokenizer")

// deniedPrefixes are families of such functions: large objects (lo_import
// reads and lo_export writes server files), dblink, adminpack's pg_file_*,
// directory listings, replication, backups and advisory locks.
var deniedPrefixes = []string{"lo_", "dblink", "pg_file_", "pg_ls_", "pg_create_", "pg_replication_", "pg_logical_",
	"pg_backup_", "pg_advisory_", "pg_try_advisory_"}

func wordSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

func deniedFunc(name string) bool {
	if deniedFuncs[name] {
		return true
	}
	for _, p := range deniedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func invalid(msg string) error { return tool.NewErrorDetails("invalid_arguments", msg, true) }

func readOnlyErr(msg string) error {
	return tool.NewErrorDetails("read_only", "sql_query runs statements that only read: "+msg, true)
}

// checkStatement parses q into tokens and refuses what is not one
// statement, and, when readOnly, what is not a reading statement; on
// both tools, what reaches outside the database. It reads the text as
// the engine does (comments, quoted names, string and dollar-quoted
// literals), so no comment, case or spacing hides a keyword from it.
func checkStatement(q string, postgres, readOnly bool) error {
	toks, err := lex(q, postgres)
	if err != nil {
		return invalid(err.Error())
	}
	for len(toks) > 0 && toks[len(toks)-1].text == ";" {
		toks = toks[:len(toks)-1]
	}
	if len(toks) == 0 {
		return invalid("sql is empty")
	}
	for _, t := range toks {
		if t.kind == 'p' && t.text == ";" {
			return invalid("one statement a call: the sql holds more than one (;)")
		}
	}
	first := ""
	for _, t := range toks {
		if t.text != "(" { // (SELECT …) UNION (SELECT …)
			first = strings.ToLower(t.text)
			break
		}
	}
	if readOnly && !readKinds[first] && !(postgres && pgReadKinds[first]) {
		kinds := "SELECT, WITH … SELECT, VALUES or EXPLAIN"
		if postgres {
			kinds = "SELECT, WITH … SELECT, VALUES, EXPLAIN, SHOW or TABLE"
		}
		return readOnlyErr(fmt.Sprintf("%s, not %s", kinds, strings.ToUpper(first)))
	}
	if !readOnly && (first == "do" || !postgres && first == "vacuum") {
		return tool.NewErrorDetails("refused", strings.ToUpper(first)+" is refused: it runs code or writes files outside the tables", true)
	}
	for i, t := range toks {
		w := strings.ToLower(t.text)
		switch {
		case t.kind == 'w' && readOnly && writeWords[w]:
			return readOnlyErr(fmt.Sprintf("%s is refused (it writes, or reaches outside the database)", strings.ToUpper(w)))
		case t.kind == 'w' && outsideWords[w]:
			return tool.NewErrorDetails("refused", strings.ToUpper(w)+" is refused: it reaches files or programs outside the tables", true)
		case (t.kind == 'w' || t.kind == 'q') && i+1 < len(toks) && toks[i+1].text == "(" && deniedFunc(w):
			return tool.NewErrorDetails("refused", fmt.Sprintf("the function %s is refused: it reaches outside the tables or runs SQL given as text", w), true)
		}
	}
	return nil
}

// lex splits q into tokens as SQLite, or Postgres when postgres, reads
// it.
func lex(q string, postgres bool) ([]token, error) {
	var toks []token
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(q[i:], "--"):
			if j := strings.IndexByte(q[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(q)
			}
		case strings.HasPrefix(q[i:], "/*"):
			end, err := blockComment(q, i, postgres)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '\'':
			// E'…' takes backslash escapes (Postgres); the E is the word
			// just before, with nothing between.
			esc := postgres && len(toks) > 0 && strings.EqualFold(toks[len(toks)-1].text, "e") && i > 0 && (q[i-1] == 'e' || q[i-1] == 'E')
			end, err := quoted(q, i, '\'', esc)
			if err != nil {
				return nil, err
			}
			toks, i = append(toks, token{'l', q[i:end]}), end
		case c == '"' || !postgres && c == '`':
			if postgres && i >= 2 && strings.EqualFold(q[i-2:i], "u&") {
				return nil, fmt.Errorf("a U&\"…\" name (unicode escapes) is not taken")
			}
			end, err := quoted(q, i, c, false)
			if err != nil {
				return nil, err
			}
			toks, i = append(toks, token{'q', strings.ReplaceAll(q[i+1:end-1], string(c)+string(c), string(c))}), end
		case !postgres && c == '[':
			j := strings.IndexByte(q[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("an unterminated [name]")
			}
			toks, i = append(toks, token{'q', q[i+1 : i+j]}), i+j+1
		case c == '$' && postgres:
			end, ok, err := dollarQuoted(q, i)
			if err != nil {
				return nil, err
			}
			if !ok { // $1, a parameter
				end = i + 1
				for end < len(q) && isWordByte(q[end]) {
					end++
				}
			}
			toks, i = append(toks, token{'l', q[i:end]}), end
		case isWordByte(c) || c == '$':
			j := i + 1
			for j < len(q) && (isWordByte(q[j]) || q[j] == '$') {
				j++
			}
			kind := byte('w')
			if c >= '0' && c <= '9' || c == '$' {
				kind = 'l'
			}
			toks, i = append(toks, token{kind, q[i:j]}), j
		default:
			toks, i = append(toks, token{'p', q[i : i+1]}), i+1
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// blockComment returns the end of the comment at i; Postgres nests them.
func blockComment(q string, i int, nested bool) (int, error) {
	depth := 0
	for j := i; j+1 < len(q); j++ {
		switch {
		case q[j] == '/' && q[j+1] == '*' && (nested || depth == 0):
			depth++
			j++
		case q[j] == '*' && q[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("an unterminated /* comment")
}

// quoted returns the end of the literal or name quoted by quote at i
// (a doubled quote is one character of it; with esc, a backslash
// escapes the next character).
func quoted(q string, i int, quote byte, esc bool) (int, error) {
	for j := i + 1; j < len(q); j++ {
		switch {
		case esc && q[j] == '\\':
			j++
		case q[j] == quote && j+1 < len(q) && q[j+1] == quote:
			j++
		case q[j] == quote:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("an unterminated %c…%c", quote, quote)
}

// dollarQuoted returns the end of Postgres's $tag$…$tag$ at i, or false
// when $ starts no such literal ($1).
func dollarQuoted(q string, i int) (int, bool, error) {
	j := i + 1
	for j < len(q) && isWordByte(q[j]) && !(j == i+1 && q[j] >= '0' && q[j] <= '9') {
		j++
	}
	if j >= len(q) || q[j] != '$' {
		return 0, false, nil
	}
	tag := q[i : j+1]
	end := strings.Index(q[j+1:], tag)
	if end < 0 {
		return 0, false, fmt.Errorf("an unterminated %s…%s literal", tag, tag)
	}
	return j + 1 + end + len(tag), true, nil
}
