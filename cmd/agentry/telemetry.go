package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/pipeline"
)

// telemetry is the binary's OpenTelemetry export, as the standard OTEL_*
// variables ask for it: spans and metrics over OTLP/HTTP, or nothing at
// all. The binary hands its providers to the agents it builds; it sets
// no global.
type telemetry struct {
	tracers *sdktrace.TracerProvider // nil: no spans
	meters  *sdkmetric.MeterProvider // nil: no metrics
}

// openTelemetry reads the environment: OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER
// and OTEL_METRICS_EXPORTER ("otlp" or "none"), OTEL_EXPORTER_OTLP_PROTOCOL
// (http/protobuf), and an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or the
// per-signal one) without which nothing is exported unless an exporter is
// named. The exporters read the rest (headers, timeout, certificates,
// compression), the SDK the sampler (OTEL_TRACES_SAMPLER) and batching, the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func openTelemetry(ctx context.Context) (*telemetry, error) {
	t := &telemetry{}
	if on(os.Getenv("OTEL_SDK_DISABLED")) {
		return t, nil
	}
	traces, err := exporting("TRACES")
	if err != nil {
		return nil, err
	}
	metrics, err := exporting("METRICS")
	if err != nil || !traces && !metrics {
		return t, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("agentry"), semconv.ServiceVersion(version())))
	if err == nil {
		res, err = resource.Merge(res, envResource())
	}
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	if traces {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		t.tracers = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	}
	if metrics {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			t.shutdown()
			return nil, fmt.Errorf("OTLP metric exporter: %w", err)
		}
		t.meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
	}
	return t, nil
}

// envResource is OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, which
// win over the binary's own service name.
func envResource() *resource.Resource {
	r, _ := resource.New(context.Background(), resource.WithFromEnv()) // a malformed variable is skipped, as the SDK does
	return r
}

// exporting says whether the signal ("TRACES", "METRICS") is exported.
func exporting(signal string) (bool, error) {
	name := "OTEL_" + signal + "_EXPORTER"
	switch exp := strings.TrimSpace(os.Getenv(name)); exp {
	case "none":
		return false, nil
	case "", "otlp":
		if exp == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") == "" {
			return false, nil // nothing asked for: nothing built
		}
	default:
		return false, fmt.Errorf("%s=%q: agentry exports by OTLP only (otlp, or none)", name, exp)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%s=%q: agentry exports OTLP over HTTP (http/protobuf); point it at the collector's HTTP port (4318)", v, p)
			}
			break
		}
	}
	return true, nil
}

func on(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// agentOptions are the options that send an agent's spans and metrics
// to the exporters.
func (t *telemetry) agentOptions() []agent.Option {
	var opts []agent.Option
	if t.tracers != nil {
		opts = append(opts, agent.WithTracerProvider(t.tracers))
	}
	if t.meters != nil {
		opts = append(opts, agent.WithMeterProvider(t.meters))
	}
	return opts
}

// pipelineOptions send a pipeline's spans to the exporter.
func (t *telemetry) pipelineOptions() []pipeline.Option {
	if t.tracers == nil {
		return nil
	}
	return []pipeline.Option{pipeline.WithTracerProvider(t.tracers)}
}

// shutdown sends what is buffered, waiting at most a few seconds: a
// collector that is down must not hold the process.
func (t *telemetry) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if t.tracers != nil {
		errs = append(errs, t.tracers.Shutdown(ctx))
	}
	if t.meters != nil {
		errs = append(errs, t.meters.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
