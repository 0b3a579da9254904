package tool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentry/agentry/tool"
)

func ExampleFunc() {
	type weatherIn struct {
		City  string `json:"city" description:"City name."`
		Units string `json:"units,omitempty" enum:"metric,imperial"`
	}
	weather := tool.Must(tool.Func("weather", "Current weather in a city.",
		func(_ context.Context, in weatherIn) (map[string]any, error) {
			return map[string]any{"city": in.City, "temp": 21}, nil
		}, tool.WithIdempotency(tool.Safe)))

	fmt.Println(string(weather.Info().Parameters))
	out, _ := weather.Call(context.Background(), []byte(`{"city": "Oslo"}`))
	fmt.Println(string(out))
	_, err := weather.Call(context.Background(), []byte(`{"units": "kelvin"}`))
	var ae *tool.ArgumentError
	fmt.Println(errors.As(err, &ae), ae.Problems)
	// Output:
	// {"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"city":{"type":"string","description":"City name."},"units":{"type":"string","enum":["metric","imperial"]}},"required":["city"],"additionalProperties":false}
	// {"city":"Oslo","temp":21}
	// true [units: "kelvin" is not one of metric, imperial city: required argument is missing]
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
