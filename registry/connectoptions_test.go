package registry

import (
	"net/url"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// The query of each connect option kind decodes as upstream's generated
// conversions decode it (k8s.io/kubernetes pkg/apis/core/v1), through the
// scheme's parameter codec as the generic server calls it.
func TestConnectOptionsFromQuery(t *testing.T) {
	api, err := New()
	if err != nil {
		t.Fatal(err)
	}
	codec := runtime.NewParameterCodec(api.scheme)
	since := metav1.NewTime(time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name  string
		query string
		into  runtime.Object
		want  runtime.Object
	}{
		{"log", "container=app&follow=true&previous=1&sinceTime=2026-12-06T07:00:00Z&timestamps=true&tailLines=10&limitBytes=100&insecureSkipTLSVerifyBackend=false",
			&corev1.PodLogOptions{}, &corev1.PodLogOptions{Container: "app", Follow: true, Previous: true, SinceTime: &since, Timestamps: true,
				TailLines: ptr.To[int64](10), LimitBytes: ptr.To[int64](100)}},
		{"log, false spelled 0", "follow=0&sinceSeconds=5", &corev1.PodLogOptions{}, &corev1.PodLogOptions{SinceSeconds: ptr.To[int64](5)}},
		{"exec", "command=sh&command=-c&command=echo+hi&stdin=true&stdout=1&tty=true&container=c",
			&corev1.PodExecOptions{}, &corev1.PodExecOptions{Command: []string{"sh", "-c", "echo hi"}, Stdin: true, Stdout: true, TTY: true, Container: "c"}},
		{"attach", "stderr=true", &corev1.PodAttachOptions{}, &corev1.PodAttachOptions{Stderr: true}},
		{"portforward", "ports=8080&ports=9090", &corev1.PodPortForwardOptions{}, &corev1.PodPortForwardOptions{Ports: []int32{8080, 9090}}},
		{"node proxy", "path=/healthz", &corev1.NodeProxyOptions{}, &corev1.NodeProxyOptions{Path: "/healthz"}},
		{"pod proxy", "path=/x/", &corev1.PodProxyOptions{}, &corev1.PodProxyOptions{Path: "/x/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if err := codec.DecodeParameters(q, corev1.SchemeGroupVersion, tc.into); err != nil {
				t.Fatal(err)
			}
			tc.into.GetObjectKind().SetGroupVersionKind(tc.want.GetObjectKind().GroupVersionKind())
			if !reflect.DeepEqual(tc.into, tc.want) {
				t.Errorf("got %+v\nwant %+v", tc.into, tc.want)
			}
		})
	}
	for _, bad := range []string{"tailLines=ten", "sinceTime=yesterday"} {
		q, _ := url.ParseQuery(bad)
		if err := codec.DecodeParameters(q, corev1.SchemeGroupVersion, &corev1.PodLogOptions{}); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}
