// The health readers of Flux and Argo CD, pinned (see main.go). Go 1.24 as the rest of the repo.
//   - sigs.k8s.io/cli-utils v0.37.2: upstream kstatus, latest release.
//   - github.com/fluxcd/cli-utils: Flux's fork. Its pkg/kstatus/status is identical to upstream's
//     in every release checked, v0.36.0-flux.13 to v1.4.0 (what kustomize-controller v1.10.1
//     links); pinned at v0.36.0-flux.14, the newest that builds with Go 1.24.
//   - github.com/yuin/gopher-lua v1.1.2, layeh.com/gopher-json: as Argo CD v3.5.1's go.mod.
module rillet.local/tests/gitopshealth

go 1.24.0

require (
	github.com/fluxcd/cli-utils v0.36.0-flux.14
	github.com/yuin/gopher-lua v1.1.2
	k8s.io/apimachinery v0.33.2
	layeh.com/gopher-json v0.0.0-20190114024228-97fed8db8427
	sigs.k8s.io/cli-utils v0.37.2
)

require (
	github.com/fxamacker/cbor/v2 v2.8.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/net v0.41.0 // indirect
	golang.org/x/text v0.27.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/api v0.33.2 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
	k8s.io/utils v0.0.0-20250604170112-4c0f3b243397 // indirect
	sigs.k8s.io/json v0.0.0-20241014173422-cfa47c3a1cc8 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v4 v4.7.0 // indirect
	sigs.k8s.io/yaml v1.5.0 // indirect
)
