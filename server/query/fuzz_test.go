package query_test

import (
	"net/url"
	"strings"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestore/kubestore/server/query"
)

var params = []string{"resourceVersion", "timeoutSeconds", "limit", "labelSelector", "fieldSelector"}

// A query Check accepts is one the upstream handlers decode without error
// and whose resourceVersion and timeoutSeconds the storage can use; a
// refusal names the parameter. Seeds beyond these live in
// testdata/fuzz/FuzzCheck/.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"", "watch=1", "resourceVersion=0", "resourceVersion=abc", "resourceVersion=-1",
		"timeoutSeconds=-1", "timeoutSeconds=10", "timeoutSeconds=10s", "limit=ten", "limit=-5",
		"labelSelector=a+in+(b", "labelSelector=a%3Db,c!%3Dd", "fieldSelector=metadata.name%3Dx",
		"fieldSelector=metadata.name", "resourceVersion=1&resourceVersion=x", "labelSelector=x%3E1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw)
		err := query.Check(q)
		if err != nil {
			msg := err.Error()
			named := false
			for _, p := range params {
				named = named || strings.HasPrefix(msg, "invalid "+p+" ")
			}
			if !named {
				t.Errorf("error %q does not start with invalid <parameter>", msg)
			}
			return
		}
		var opts metainternalversion.ListOptions
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, &opts); err != nil {
			t.Errorf("Check accepted %q, the handlers' decoding refuses it: %v", raw, err)
			return
		}
		if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds < 0 {
			t.Errorf("Check accepted timeoutSeconds %d", *opts.TimeoutSeconds)
		}
		if rv := opts.ResourceVersion; rv != "" && strings.TrimLeft(rv, "0123456789") != "" {
			t.Errorf("Check accepted resourceVersion %q", rv)
		}
	})
}
