package tool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentry/agentry/tool"
)

func ExampleFunc() {
	type weatherIn struct {
		City  string `json:"city" jsonschema:"City name."`
		Units string `json:"units,omitempty"`
	}
	weather := tool.Must(tool.Func("weather", "Current weather in a city.",
		func(_ context.Context, in weatherIn) (map[string]any, error) {
			return map[string]any{"city": in.City, "temp": 21}, nil
		}, tool.WithIdempotency(tool.Safe)))

	fmt.Println(string(weather.Info().Parameters))
	out, _ := weather.Call(context.Background(), []byte(`{"city": "Oslo"}`))
	fmt.Println(string(out))
	_, err := weather.Call(context.Background(), []byte(`{"units": "metric"}`))
	var ae *tool.ArgumentError
	fmt.Println(errors.As(err, &ae), ae.Problems)
	// Output:
	// {"type":"object","properties":{"city":{"type":"string","description":"City name."},"units":{"type":"string"}},"$schema":"https://json-schema.org/draft/2020-12/schema","required":["city"],"additionalProperties":false}
	// {"city":"Oslo","temp":21}
	// true [missing property 'city']
}

// A schema derived from the type can be adjusted before the tool is made:
// here an enum the type cannot express.
func ExampleWithSchema() {
	type weatherIn struct {
		City  string `json:"city"`
		Units string `json:"units,omitempty"`
	}
	s, err := tool.SchemaFor[weatherIn]()
	if err != nil {
		panic(err)
	}
	s.Properties["units"].Enum = []any{"metric", "imperial"}
	weather := tool.Must(tool.Func("weather", "Current weather in a city.",
		func(_ context.Context, in weatherIn) (string, error) { return in.City + " in " + in.Units, nil },
		tool.WithSchema(s)))

	out, _ := weather.Call(context.Background(), []byte(`{"city": "Oslo", "units": "metric"}`))
	fmt.Println(string(out))
	_, err = weather.Call(context.Background(), []byte(`{"city": "Oslo", "units": "kelvin"}`))
	fmt.Println(err)
	// Output:
	// "Oslo in metric"
	// invalid arguments for tool weather: units: value must be one of 'metric', 'imperial'
}

func ExampleNormalize() {
	r, _ := tool.Normalize(map[string]any{"hits": 3})
	fmt.Println(r.Status, r.Data["hits"])
	r, _ = tool.Normalize(tool.NotFound("user", "u-1"))
	fmt.Println(r.Status, r.Error.Type, r.Error.Message)
	// Output:
	// success 3
	// error not_found user "u-1" not found
}
