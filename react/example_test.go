package react_test

import (
	"fmt"

	"github.com/agentry/agentry/react"
)

func ExampleParse() {
	r, err := react.Parse("Thought: I need the card.\nAction: get_card\nAction Input: {\"cardId\": \"card_123\"}\nObservation: (made up)")
	fmt.Printf("%q %q %s %v\n", r.Thought, r.Action, r.Input, err)
	_, err = react.Parse("Thought: let me think some more")
	fmt.Println(err)
	// Output:
	// "I need the card." "get_card" {"cardId": "card_123"} <nil>
	// unusable reply: the reply has neither an Action nor a Final Answer
}
