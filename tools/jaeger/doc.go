// Package jaeger pins the Jaeger all-in-one program the OpenTelemetry
// end-to-end test sends traces to. It lives in its own module so that
// Jaeger's large dependency tree stays out of gapscope's go.mod; build it with
//
//	cd tools/jaeger && go build -o jaeger github.com/jaegertracing/jaeger/cmd/jaeger
package jaeger
