package access

import (
	"context"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/storage/value"
)

// The token file parser never panics, and what it accepts has a user name
// for every token and no token twice.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte("t1,alice,1001\nt2,bob,1002,\"g1,g2\"\n"))
	f.Add([]byte("# comment\n t3 , carol , 3 , \" a , b \"\n"))
	f.Add([]byte("t1,alice,1\nt1,bob,2\n"))
	f.Add([]byte("\"unterminated,alice,1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseTokens(data)
		if err != nil {
			return
		}
		seen := map[[32]byte]bool{}
		for _, e := range entries {
			if e.user.Name == "" || seen[e.digest] {
				t.Fatalf("accepted an entry without a user or a duplicate token: %+v", e.user)
			}
			seen[e.digest] = true
		}
	})
}

// The policy parser never panics, and every rule it accepts can match
// someone: it names users or groups, verbs and what they apply to.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte("rules:\n- users: [a]\n  verbs: [get]\n  resources: [pods]\n  namespaces: ['*']\n"))
	f.Add([]byte("rules:\n- groups: [g]\n  verbs: ['*']\n  nonResourceURLs: [/metrics, /api/*]\n"))
	f.Add([]byte("rules:\n- users: [a]\n  verbs: [get]\n  resource: [pods]\n"))
	f.Add([]byte("{\"rules\": [{\"users\": [\"a\"], \"users\": [\"b\"]}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parsePolicy(data)
		if err != nil {
			return
		}
		a := &Access{}
		a.policy.Store(p)
		for _, r := range p.Rules {
			if (len(r.Users) == 0 && len(r.Groups) == 0) || len(r.Verbs) == 0 || (len(r.Resources) == 0 && len(r.NonResourceURLs) == 0) {
				t.Fatalf("accepted a rule that matches nothing: %+v", r)
			}
		}
		// Deciding never fails, whatever the rules hold.
		attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "a", Groups: []string{"g"}}, Verb: "get",
			ResourceRequest: true, Resource: "pods", Namespace: "default"}
		if _, _, err := a.authorize(context.Background(), attrs); err != nil {
			t.Fatal(err)
		}
	})
}

// The EncryptionConfiguration parser never panics, and every transformer
// it builds round-trips a value.
func FuzzParseEncryptionConfig(f *testing.F) {
	f.Add([]byte(generatedEncryptionConfig))
	f.Add([]byte("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets, configmaps]\n  providers:\n  - aesgcm:\n      keys:\n      - {name: k, secret: AAAAAAAAAAAAAAAAAAAAAA==}\n  - aescbc:\n      keys:\n      - {name: c, secret: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=}\n  - identity: {}\n"))
	f.Add([]byte("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: ['*.*']\n  providers:\n  - identity: {}\n"))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		transformers, err := parseEncryptionConfig(data)
		if err != nil {
			return
		}
		ctx := context.Background()
		for gr, tr := range transformers {
			key := value.DefaultContext("/registry/" + gr.String() + "/ns/name")
			stored, err := tr.TransformToStorage(ctx, []byte("value"), key)
			if err != nil {
				t.Fatalf("%s: encrypting: %v", gr, err)
			}
			back, _, err := tr.TransformFromStorage(ctx, stored, key)
			if err != nil || string(back) != "value" {
				t.Fatalf("%s: round trip gave %q, %v", gr, back, err)
			}
		}
	})
}
