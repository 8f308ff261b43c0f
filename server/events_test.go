package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// Events are one key space served as core/v1 and events.k8s.io/v1, as on
// kube-apiserver: written in one version, read, selected and watched in
// the other.
func TestEventsServedInBothVersions(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	core, ev1 := ts.client.CoreV1().Events("default"), ts.client.EventsV1().Events("default")

	w, err := ev1.Watch(ctx, metav1.ListOptions{FieldSelector: "regarding.name=p1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	created, err := ev1.Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "e1"}, EventTime: now, ReportingController: "kubestore.io/test", ReportingInstance: "i1",
		Action: "Reconcile", Reason: "Created", Type: corev1.EventTypeNormal, Note: "made it",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p1", UID: "u1", APIVersion: "v1"},
		Series:    &eventsv1.EventSeries{Count: 2, LastObservedTime: now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := core.Get(ctx, "e1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Message != "made it" || got.InvolvedObject.Name != "p1" || got.ReportingController != "kubestore.io/test" ||
		got.Series == nil || got.Series.Count != 2 || got.ResourceVersion != created.ResourceVersion || !got.EventTime.Equal(&now) {
		t.Errorf("core/v1 view of an events.k8s.io/v1 Event: %+v", got)
	}
	select {
	case e := <-w.ResultChan():
		if e.Type != watch.Added || e.Object.(*eventsv1.Event).Note != "made it" {
			t.Errorf("watch of events.k8s.io/v1: %s %+v", e.Type, e.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event for the created Event")
	}

	// A legacy Event written through core/v1 reads as events.k8s.io/v1.
	if _, err := core.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e2"}, Reason: "Pulled", Message: "legacy", Type: corev1.EventTypeWarning,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p2"}, Source: corev1.EventSource{Component: "kubelet", Host: "n1"}, Count: 3},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1e, err := ev1.Get(ctx, "e2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v1e.Note != "legacy" || v1e.Regarding.Name != "p2" || v1e.DeprecatedSource.Component != "kubelet" || v1e.DeprecatedCount != 3 {
		t.Errorf("events.k8s.io/v1 view of a core/v1 Event: %+v", v1e)
	}

	// Field selectors of each version, upstream's names.
	for _, tc := range []struct {
		version, selector string
		want              []string
	}{
		{"v1", "involvedObject.name=p1", []string{"e1"}},
		{"v1", "reportingComponent=kubestore.io/test", []string{"e1"}},
		{"v1", "source=kubelet", []string{"e2"}},
		{"events.k8s.io/v1", "regarding.name=p2", []string{"e2"}},
		{"events.k8s.io/v1", "reportingController=kubestore.io/test", []string{"e1"}},
		{"events.k8s.io/v1", "type=Warning", []string{"e2"}},
		{"events.k8s.io/v1", "regarding.kind=Pod,reason=Created", []string{"e1"}},
	} {
		var names []string
		if tc.version == "v1" {
			l, err := core.List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
			if err != nil {
				t.Fatalf("%s %s: %v", tc.version, tc.selector, err)
			}
			for _, e := range l.Items {
				names = append(names, e.Name)
			}
		} else {
			l, err := ev1.List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
			if err != nil {
				t.Fatalf("%s %s: %v", tc.version, tc.selector, err)
			}
			for _, e := range l.Items {
				names = append(names, e.Name)
			}
		}
		if fmt.Sprint(names) != fmt.Sprint(tc.want) {
			t.Errorf("%s fieldSelector=%s: %v, want %v", tc.version, tc.selector, names, tc.want)
		}
	}
	_, err = ev1.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=p1"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "involvedObject.name") {
		t.Errorf("events.k8s.io/v1 with a core/v1 field label: %v, want 400 naming it", err)
	}

	// events.k8s.io/v1's stricter rules, upstream's ValidateEventCreate
	// and ValidateEventUpdate.
	for _, tc := range []struct {
		name  string
		event eventsv1.Event
		field string
	}{
		{"no eventTime", eventsv1.Event{ReportingController: "a.io/b", ReportingInstance: "i", Action: "A", Reason: "R", Type: "Normal"}, "eventTime"},
		{"bad type", eventsv1.Event{EventTime: now, ReportingController: "a.io/b", ReportingInstance: "i", Action: "A", Reason: "R", Type: "Fatal"}, "type"},
		{"deprecated count", eventsv1.Event{EventTime: now, ReportingController: "a.io/b", ReportingInstance: "i", Action: "A", Reason: "R", Type: "Normal", DeprecatedCount: 2}, "count"},
		{"series of one", eventsv1.Event{EventTime: now, ReportingController: "a.io/b", ReportingInstance: "i", Action: "A", Reason: "R", Type: "Normal", Series: &eventsv1.EventSeries{Count: 1, LastObservedTime: now}}, "series.count"},
		{"no action", eventsv1.Event{EventTime: now, ReportingController: "a.io/b", ReportingInstance: "i", Reason: "R", Type: "Normal"}, "action"},
	} {
		tc.event.Name = "bad"
		tc.event.Regarding = corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"}
		_, err := ev1.Create(ctx, &tc.event, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want 422 naming %s", tc.name, err, tc.field)
		}
	}
	created.Note = "rewritten"
	if _, err := ev1.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "message") {
		t.Errorf("changing the note through events.k8s.io/v1: %v, want 422 (immutable)", err)
	}
	// core/v1 keeps its legacy leniency.
	got.Message = "rewritten"
	if _, err := core.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Errorf("changing the message through core/v1: %v", err)
	}
}

// client-go's events.k8s.io/v1 recorder (what controller-runtime's
// GetEventRecorder uses) records through kubestore: a repeated event
// becomes a series, and core/v1 readers see it.
func TestEventsRecorderSeries(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: ts.client.EventsV1()})
	b.StartRecordingToSink(ctx.Done())
	defer b.Shutdown()
	rec := b.NewRecorder(scheme.Scheme, "kubestore-test")
	ref := &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: "default", Name: "cfg", UID: "u-cfg"}
	rec.Eventf(ref, nil, corev1.EventTypeWarning, "Degraded", "Reconcile", "attempt %d", 1)

	var first corev1.Event
	eventually(t, 20*time.Second, "the recorded Event through core/v1", func() (bool, error) {
		l, err := ts.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=cfg,reason=Degraded"})
		if err != nil || len(l.Items) != 1 {
			return false, err
		}
		first = l.Items[0]
		return true, nil
	})
	if first.ReportingController != "kubestore-test" || first.Action != "Reconcile" || first.Type != corev1.EventTypeWarning {
		t.Errorf("recorded Event %+v", first)
	}
	// The same event again: the recorder's isomorphic key makes it a
	// series, which it PATCHes onto the Event (after its 6 minute
	// heartbeat upstream; a second occurrence soon after counts too).
	rec.Eventf(ref, nil, corev1.EventTypeWarning, "Degraded", "Reconcile", "attempt %d", 1)
	eventually(t, 30*time.Second, "the Event to become a series", func() (bool, error) {
		e, err := ts.client.EventsV1().Events("default").Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return e.Series != nil && e.Series.Count >= 2, nil
	})
}
