// Package validate checks the deployment files under deploy/ with real validators:
// the compose-spec schema and loader (compose-go), the Kubernetes API types (strict
// decoding), Grafana's dashboard schema (grafana-foundation-sdk), the PromQL parser, the
// Dockerfile parser and linter of BuildKit, and Prometheus itself (promtool and the
// server, found through PROMTOOL and PROMETHEUS; see validate.sh).
//
// It is a module of its own, outside go.work: its validators bring dependency versions
// (gRPC, among others) that must not leak into the services' build. `make test` runs it
// through deploy/validate/validate.sh; by hand:
//
//	deploy/validate/validate.sh          # installs promtool once, then every check
//	cd deploy/validate && GOWORK=off go test ./...
package validate
