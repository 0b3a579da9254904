package prompt_test

import (
	"context"
	"fmt"

	"github.com/agentry/agentry/prompt"
)

// A template of a store, rendered with its variables; a missing one is an
// error that names it.
func ExampleTemplate_Render() {
	store := prompt.Fixed(prompt.Template{ID: "greet", Version: "v1", Engine: prompt.Mustache,
		Text: "You greet {{name}} in {{language}}.", RequiredVars: []string{"name"}})
	t, err := store.Get(context.Background(), "greet", "") // "": the latest version
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := t.Render(map[string]any{"name": "Ada", "language": "Portuguese"}, true)
	fmt.Println(r.Text, r.Tokens)
	_, err = t.Render(map[string]any{"language": "Portuguese"}, true)
	fmt.Println(err)
	// Output:
	// You greet Ada in Portuguese. 7
	// prompt greet@v1: missing variables name
}
