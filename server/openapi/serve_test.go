package openapi

import (
	"runtime"
	"strings"
	"testing"
	"weak"

	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// aliveAfterBuild builds the schemas of core/v1's kinds from cfg, as the
// generic server's install does for server-side apply, drops them, and
// counts how many a collection leaves while cfg lives.
func aliveAfterBuild(t *testing.T, cfg *common.OpenAPIV3Config) (alive, built int) {
	t.Helper()
	var names []string
	for name := range cfg.GetDefinitions(func(string) spec.Ref { return spec.Ref{} }) {
		if strings.HasPrefix(name, "io.k8s.api.core.v1.") {
			names = append(names, name)
		}
	}
	schemas, err := builder3.BuildOpenAPIDefinitionsForResources(cfg, names...)
	if err != nil {
		t.Fatal(err)
	}
	var refs []weak.Pointer[spec.Schema]
	for _, s := range schemas {
		refs = append(refs, weak.Make(s))
	}
	schemas = nil
	runtime.GC()
	for _, r := range refs {
		if r.Value() != nil {
			alive++
		}
	}
	runtime.KeepAlive(cfg)
	return alive, len(refs)
}

// A config with OperationIDs keeps nothing of what was built from it;
// without, upstream's builder keeps its first build for the config's
// life. When the second half fails, upstream no longer does, and
// OperationIDs can go.
func TestOperationIDsKeepNoBuild(t *testing.T) {
	newConfig := func() *common.OpenAPIV3Config {
		return genericapiserver.DefaultOpenAPIV3Config(GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer(scheme.Scheme))
	}
	cfg := newConfig()
	cfg.GetOperationIDAndTagsFromRoute = OperationIDs(cfg.GetOperationIDAndTags)
	if alive, built := aliveAfterBuild(t, cfg); alive != 0 {
		t.Errorf("with OperationIDs, %d of %d schemas built stay live", alive, built)
	}
	if alive, built := aliveAfterBuild(t, newConfig()); alive != built {
		t.Errorf("upstream's builder kept %d of %d schemas of its first build: has it stopped keeping them?", alive, built)
	}
}
