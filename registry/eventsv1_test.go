package registry

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every field survives core/v1 -> events.k8s.io/v1 -> core/v1, with
// upstream's renames (Convert_core_Event_To_v1_Event and back).
func TestEventConversionRoundTrip(t *testing.T) {
	now := metav1.NewTime(time.Unix(1700000000, 0))
	micro := metav1.NewMicroTime(time.Unix(1700000001, 5000))
	in := corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e", Namespace: "ns", Labels: map[string]string{"a": "b"}, ResourceVersion: "7"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: "u", APIVersion: "v1", ResourceVersion: "3", FieldPath: "spec.containers{c}"},
		Reason:         "R", Message: "m", Source: corev1.EventSource{Component: "kubelet", Host: "h"},
		FirstTimestamp: now, LastTimestamp: now, Count: 4, Type: corev1.EventTypeWarning, EventTime: micro,
		Series: &corev1.EventSeries{Count: 5, LastObservedTime: micro}, Action: "A",
		Related:             &corev1.ObjectReference{Kind: "Node", Name: "n"},
		ReportingController: "kubelet", ReportingInstance: "h",
	}
	var v1 eventsv1.Event
	eventToV1(&in, &v1)
	if v1.Note != "m" || v1.Regarding != in.InvolvedObject || v1.DeprecatedSource != in.Source || v1.DeprecatedCount != 4 ||
		!v1.DeprecatedFirstTimestamp.Equal(&now) || v1.Series.Count != 5 || v1.ReportingController != "kubelet" {
		t.Errorf("events.k8s.io/v1 form: %+v", v1)
	}
	var back corev1.Event
	eventFromV1(&v1, &back)
	if !reflect.DeepEqual(back, in) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, in)
	}
}

// Upstream's ValidateEventCreate/Update cases for events.k8s.io/v1
// (pkg/apis/core/validation/events_test.go TestValidateEventForV1Events):
// core/v1 requests keep the legacy rules alone.
func TestValidateEventRequest(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	valid := func() *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, EventTime: now, Type: corev1.EventTypeNormal,
			ReportingController: "a.io/b", ReportingInstance: "i", Action: "A", Reason: "R"}
	}
	for _, tc := range []struct {
		name   string
		mutate func(e *corev1.Event)
		field  string
	}{
		{"valid", func(*corev1.Event) {}, ""},
		{"no eventTime", func(e *corev1.Event) { e.EventTime = metav1.MicroTime{} }, "eventTime"},
		{"unknown type", func(e *corev1.Event) { e.Type = "Info" }, "type"},
		{"firstTimestamp set", func(e *corev1.Event) { e.FirstTimestamp = metav1.Now() }, "firstTimestamp"},
		{"lastTimestamp set", func(e *corev1.Event) { e.LastTimestamp = metav1.Now() }, "lastTimestamp"},
		{"count set", func(e *corev1.Event) { e.Count = 1 }, "count"},
		{"source set", func(e *corev1.Event) { e.Source.Host = "h" }, "source"},
		{"series of one", func(e *corev1.Event) { e.Series = &corev1.EventSeries{Count: 1, LastObservedTime: now} }, "series.count"},
		{"series without time", func(e *corev1.Event) { e.Series = &corev1.EventSeries{Count: 2} }, "series.lastObservedTime"},
		{"name not a subdomain", func(e *corev1.Event) { e.Name = "p.17a:1" }, "metadata.name"},
		{"generateName not a subdomain", func(e *corev1.Event) { e.Name, e.GenerateName = "", "a:" }, "metadata.generateName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := valid()
			tc.mutate(e)
			errs := validateEventRequest(eventsv1.SchemeGroupVersion, e, nil)
			if tc.field == "" {
				if len(errs) > 0 {
					t.Errorf("valid event refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Errorf("errors %v, want one on %s", errs, tc.field)
			}
			if errs := validateEventRequest(corev1.SchemeGroupVersion, e, nil); len(errs) > 0 {
				t.Errorf("core/v1 request refused: %v", errs)
			}
		})
	}
	old := valid()
	for _, field := range []string{"message", "reason", "action", "reportingController"} {
		e := valid()
		switch field {
		case "message":
			e.Message = "changed"
		case "reason":
			e.Reason = "Changed"
		case "action":
			e.Action = "Changed"
		case "reportingController":
			e.ReportingController = "c.io/d"
		}
		errs := validateEventRequest(eventsv1.SchemeGroupVersion, e, old)
		if len(errs) != 1 || errs[0].Field != field {
			t.Errorf("update of %s: %v, want it immutable", field, errs)
		}
	}
	series := valid()
	series.Series = &corev1.EventSeries{Count: 2, LastObservedTime: now}
	if errs := validateEventRequest(eventsv1.SchemeGroupVersion, series, old); len(errs) > 0 {
		t.Errorf("a new series: %v", errs)
	}
}
