// Command incluster is an in-cluster client-go program as any workload
// that talks to the API is written: rest.InClusterConfig (the Service
// default/kubernetes from KUBERNETES_SERVICE_HOST and _PORT, the projected
// ServiceAccount token and ca.crt), nothing else. The real-node tests run
// it in a pod (test/e2e/realnode_incluster_test.go), from an image of this
// binary alone (CGO_ENABLED=0).
//
// In its own namespace it lists the ConfigMaps (again and again until
// the API answers), asks who it is (a SelfSubjectReview), lists the
// Secrets once to report the answer, with --custom lists a custom
// resource's objects and writes each one's status, then watches the ConfigMaps from the
// list's resourceVersion (listing again, RELISTED, when the watch cannot
// be resumed, as an informer does), and writes what it saw into the ConfigMap
// --report: user, listed, secrets, and seen.NAME (the data of NAME at
// its latest change, as JSON) for every ConfigMap that changes after the
// list. Each step is a line on stdout, after the time:
//
//	START host=https://10.0.0.1:443 namespace=apps
//	LIST-FAILED try=1 <error>
//	LISTED count=3 resourceVersion=42 tries=2 after=1.2s
//	WHOAMI system:serviceaccount:apps:lister
//	SECRETS 403
//	EVENT MODIFIED probe resourceVersion=57
//	REPORTED seen.probe
//
// It never exits by itself: every failed request is retried, so that
// restarts and outages of the API are a client's ordinary life.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
)

// namespaceFile is where the kube-api-access volume puts the pod's
// namespace.
const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func main() {
	reportName := flag.String("report", "incluster-report", "the ConfigMap, in the pod's namespace, that this program writes what it saw to")
	custom := flag.String("custom", "", "a custom resource, resource.group/version: its objects in the pod's namespace are listed and each gets status.observedBy, the pod's user")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *reportName, *custom); err != nil && ctx.Err() == nil {
		say("FAILED %v", err)
		os.Exit(1)
	}
}

var started = time.Now()

// say prints one line, after the wall-clock time (the test compares it
// with the container's start).
func say(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, reportName, custom string) error {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	ns, err := os.ReadFile(namespaceFile)
	if err != nil {
		return err
	}
	namespace := string(ns)
	say("START host=%s namespace=%s", cfg.Host, namespace)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cms := cs.CoreV1().ConfigMaps(namespace)

	var list *corev1.ConfigMapList
	for try := 1; ; try++ {
		list, err = cms.List(ctx, metav1.ListOptions{})
		if err == nil {
			say("LISTED count=%d resourceVersion=%s tries=%d after=%s", len(list.Items), list.ResourceVersion, try, time.Since(started))
			break
		}
		say("LIST-FAILED try=%d %v", try, err)
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	report := func(key, value string) {
		for ctx.Err() == nil {
			err := write(ctx, cs, namespace, reportName, key, value)
			if err == nil {
				say("REPORTED %s", key)
				return
			}
			say("REPORT-FAILED %s %v", key, err)
			sleep(ctx, time.Second)
		}
	}
	report("listed", fmt.Sprintf("%d at resourceVersion %s", len(list.Items), list.ResourceVersion))

	var user string
	for ctx.Err() == nil {
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil {
			user = review.Status.UserInfo.Username
			break
		}
		say("WHOAMI-FAILED %v", err)
		sleep(ctx, time.Second)
	}
	say("WHOAMI %s", user)
	report("user", user)

	// What this identity may not do: the code of the answer (0 when the
	// API did not answer).
	_, err = cs.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
	code := 200
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code = int(status.Status().Code)
	} else if err != nil {
		code = 0
	}
	say("SECRETS %d", code)
	report("secrets", strconv.Itoa(code))
	if custom != "" {
		report("custom", observe(ctx, cfg, namespace, custom, user))
	}

	// The watch, resumed from the last event's resourceVersion after
	// every disconnection (client-go's RetryWatcher). When it cannot be
	// resumed (410 Gone: the API server restarted, and its watch cache
	// starts after that resourceVersion, as kube-apiserver's), the
	// ConfigMaps are listed again, as an informer does.
	rv := list.ResourceVersion
	for {
		if err := watchFrom(ctx, cms, rv, report, reportName); err != nil {
			return err
		}
		for try := 1; ; try++ {
			list, err = cms.List(ctx, metav1.ListOptions{})
			if err == nil {
				say("RELISTED count=%d resourceVersion=%s", len(list.Items), list.ResourceVersion)
				rv = list.ResourceVersion
				break
			}
			say("RELIST-FAILED try=%d %v", try, err)
			if !sleep(ctx, time.Second) {
				return ctx.Err()
			}
		}
	}
}

// watchFrom watches the ConfigMaps from rv and reports what changes, until
// the watch cannot be resumed (nil) or ctx is done.
func watchFrom(ctx context.Context, cms corev1client.ConfigMapInterface, rv string, report func(key, value string), reportName string) error {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return cms.Watch(ctx, o) },
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.Done():
			say("WATCH-ENDED resourceVersion=%s", rv)
			return nil
		case ev := <-w.ResultChan():
			if ev.Type == watch.Error {
				say("WATCH-ERROR %v", apierrors.FromObject(ev.Object))
				continue
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				say("EVENT %s %T", ev.Type, ev.Object)
				continue
			}
			rv = cm.ResourceVersion
			say("EVENT %s %s resourceVersion=%s", ev.Type, cm.Name, cm.ResourceVersion)
			if cm.Name == reportName {
				continue // its own writes
			}
			data := "deleted"
			if ev.Type != watch.Deleted {
				b, _ := json.Marshal(cm.Data)
				data = string(b)
			}
			report("seen."+cm.Name, data)
		}
	}
}

// write sets key to value in the ConfigMap name, creating it if need be.
func write(ctx context.Context, cs kubernetes.Interface, namespace, name, key, value string) error {
	cms := cs.CoreV1().ConfigMaps(namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{key: value}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = value
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// observe lists the objects of the custom resource gvr
// (resource.group/version) in namespace, until the API answers, and
// writes status.observedBy = user on each through its status subresource.
// It says what it did.
func observe(ctx context.Context, cfg *rest.Config, namespace, gvr, user string) string {
	rg, version, _ := strings.Cut(gvr, "/")
	resource, group, _ := strings.Cut(rg, ".")
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err.Error()
	}
	objs := dyn.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: resource}).Namespace(namespace)
	var list *unstructured.UnstructuredList
	for try := 1; ; try++ {
		if list, err = objs.List(ctx, metav1.ListOptions{}); err == nil {
			break
		}
		say("CUSTOM-LIST-FAILED try=%d %v", try, err)
		if !sleep(ctx, time.Second) {
			return ctx.Err().Error()
		}
	}
	patch := fmt.Appendf(nil, `{"status":{"observedBy":%q}}`, user)
	written := 0
	for _, o := range list.Items {
		for try := 1; ctx.Err() == nil; try++ {
			if _, err = objs.Patch(ctx, o.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err == nil {
				written++
				break
			}
			say("CUSTOM-STATUS-FAILED %s try=%d %v", o.GetName(), try, err)
			sleep(ctx, time.Second)
		}
	}
	say("CUSTOM listed=%d status=%d", len(list.Items), written)
	return fmt.Sprintf("listed %d, status written on %d", len(list.Items), written)
}
