package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kubestore/kubestore/config"
)

func mirrorOn(rules ...config.MirrorRule) func(*config.Config) {
	return func(c *config.Config) {
		c.Mirror.UpstreamKubeconfig = "/etc/kubestore/upstream.kubeconfig"
		c.Mirror.NodeName = "edge-1"
		if rules != nil {
			c.Mirror.Rules = rules
		}
	}
}

func TestValidateMirror(t *testing.T) {
	pods := config.MirrorRule{Name: "pods", Resource: "pods", FieldSelector: "spec.nodeName=$(NODE_NAME)"}
	cases := []struct {
		name   string
		mutate func(*config.Config)
		want   []string // each must be in one line of the error; none means accepted
	}{
		{"default rules", mirrorOn(), nil},
		{"rules unchecked while the mirror is off", func(c *config.Config) { c.Mirror.Rules = []config.MirrorRule{{Resource: "Pods"}} }, nil},
		{"custom resource with namespaces and selectors", mirrorOn(config.MirrorRule{Resource: "widgets.example.com", Namespaces: []string{"a", "b"},
			LabelSelector: "app in (x,y),!legacy", FieldSelector: "metadata.name!=z"}), nil},
		{"no rules", func(c *config.Config) { mirrorOn()(c); c.Mirror.Rules = []config.MirrorRule{} }, []string{"mirror.rules", "--upstream-kubeconfig"}},
		{"node name", func(c *config.Config) { mirrorOn()(c); c.Mirror.NodeName = "Edge_1" }, []string{"--node-name", "Edge_1"}},
		{"resource in capitals", mirrorOn(config.MirrorRule{Resource: "Pods"}), []string{"mirror.rules[0]", "resource", `"Pods"`}},
		{"resource with a version", mirrorOn(config.MirrorRule{Name: "d", Resource: "apps/v1/deployments"}), []string{"mirror.rules[0] (d)", "resource"}},
		{"label selector", mirrorOn(config.MirrorRule{Resource: "pods", LabelSelector: "app in (x"}), []string{"mirror.rules[0]", "labelSelector", "app in (x"}},
		{"field selector", mirrorOn(config.MirrorRule{Resource: "pods", FieldSelector: "spec.nodeName"}), []string{"mirror.rules[0]", "fieldSelector", "spec.nodeName"}},
		{"namespace", mirrorOn(config.MirrorRule{Resource: "pods", Namespaces: []string{"ok", "Not_OK"}}), []string{"namespaces", "Not_OK"}},
		{"two rules of one name", mirrorOn(pods, config.MirrorRule{Resource: "pods"}), []string{"mirror.rules[1] (pods)", "name", "earlier rule"}},
		{"referenced by no rule", mirrorOn(config.MirrorRule{Resource: "secrets", ReferencedBy: "agents"}), []string{"mirror.rules[0]", "referencedBy", `"agents"`, "names no rule"}},
		{"referenced by a rule of services", mirrorOn(config.MirrorRule{Resource: "services"}, config.MirrorRule{Resource: "secrets", ReferencedBy: "services"}),
			[]string{"mirror.rules[1]", "referencedBy", "a rule of pods"}},
		{"services referenced by pods", mirrorOn(pods, config.MirrorRule{Resource: "services", ReferencedBy: "pods"}), []string{"mirror.rules[1]", "configmaps, secrets and serviceaccounts"}},
		{"referenced with a selector", mirrorOn(pods, config.MirrorRule{Resource: "secrets", ReferencedBy: "pods", LabelSelector: "a=b"}), []string{"mirror.rules[1]", "takes no namespaces or selectors"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() accepted %+v", cfg.Mirror)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				ok := true
				for _, w := range tc.want {
					ok = ok && strings.Contains(line, w)
				}
				if ok {
					return
				}
			}
			t.Errorf("no line of the error contains all of %q:\n%v", tc.want, err)
		})
	}
}

func TestMirrorSelectorsNodeName(t *testing.T) {
	r := config.MirrorRule{Resource: "pods", LabelSelector: "node=$(NODE_NAME)", FieldSelector: "spec.nodeName=$(NODE_NAME)"}
	label, field := r.Selectors("edge-7")
	if label != "node=edge-7" || field != "spec.nodeName=edge-7" {
		t.Errorf("Selectors = %q, %q", label, field)
	}
	if got := (config.MirrorRule{Resource: "endpointslices.discovery.k8s.io"}).RuleName(); got != "endpointslices.discovery.k8s.io" {
		t.Errorf("RuleName = %q", got)
	}
}

// A rules list in the file replaces the default rules whole: no rule
// inherits a field of the default rule at its index.
func TestConfigFileReplacesMirrorRules(t *testing.T) {
	cfg, err := config.ReadFile(writeFile(t, "k.yaml", "mirror:\n  rules:\n  - {name: a, resource: configmaps}\n  - {name: w, resource: widgets.example.com, namespaces: [apps]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []config.MirrorRule{{Name: "a", Resource: "configmaps"}, {Name: "w", Resource: "widgets.example.com", Namespaces: []string{"apps"}}}
	if !reflect.DeepEqual(cfg.Mirror.Rules, want) {
		t.Errorf("rules = %+v, want %+v", cfg.Mirror.Rules, want)
	}
	other, err := config.ReadFile(writeFile(t, "o.yaml", "mirror:\n  nodeName: edge-3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(other.Mirror.Rules, config.DefaultMirrorRules()) {
		t.Errorf("a file without rules: rules = %+v, want the default ones", other.Mirror.Rules)
	}
}
