package registry

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// The cases of TestValidateEventForCoreV1Events and of the events with an
// eventTime (TestValidateNewEvent...) in k8s.io/kubernetes
// pkg/apis/core/validation/events_test.go.
func TestEventValidate(t *testing.T) {
	event := func(name, ns string, ref corev1.ObjectReference, opts ...func(*corev1.Event)) *corev1.Event {
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, InvolvedObject: ref}
		for _, o := range opts {
			o(e)
		}
		return e
	}
	eventTime := metav1.NowMicro()
	newStyle := func(e *corev1.Event) {
		e.EventTime = eventTime
		e.ReportingController, e.ReportingInstance, e.Action, e.Reason = "k8s.io/my-controller", "node-xyz", "Do", "Because"
	}
	node := corev1.ObjectReference{APIVersion: "v1", Kind: "Node"}
	tests := []struct {
		name  string
		event *corev1.Event
		valid bool
	}{
		{"namespaces differ", event("test1", "foo", corev1.ObjectReference{Namespace: "bar", Kind: "Pod"}), false},
		{"invalid namespace", event("test2", "aoeu-_-aoeu", corev1.ObjectReference{Namespace: "aoeu-_-aoeu", Kind: "Pod"}), false},
		{"node in default", event("test3", metav1.NamespaceDefault, node), true},
		{"namespace in default", event("test4", metav1.NamespaceDefault, corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace"}), true},
		{"unknown kind in its namespace", event("test5", metav1.NamespaceDefault, corev1.ObjectReference{APIVersion: "apps/v1", Kind: "NoKind", Namespace: metav1.NamespaceDefault}), true},
		{"job in another namespace", event("test6", metav1.NamespaceDefault, corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: "foo"}), false},
		{"job in its namespace", event("test7", metav1.NamespaceDefault, corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: metav1.NamespaceDefault}), true},
		{"other group in another namespace", event("test8", metav1.NamespaceDefault, corev1.ObjectReference{APIVersion: "other/v1beta1", Kind: "Job", Namespace: "foo"}), false},
		{"other group in its namespace", event("test9", "foo", corev1.ObjectReference{APIVersion: "other/v1beta1", Kind: "Job", Namespace: "foo"}), true},
		{"group without version in another namespace", event("test10", metav1.NamespaceDefault, corev1.ObjectReference{APIVersion: "batch", Kind: "Job", Namespace: "foo"}), false},
		{"beta version in its namespace", event("test11", "foo", corev1.ObjectReference{APIVersion: "batch/v1beta1", Kind: "Job", Namespace: "foo"}), true},
		{"unknown kind in another namespace", event("test12", "foo", corev1.ObjectReference{APIVersion: "other/v1beta1", Kind: "FooBar", Namespace: "bar"}), false},
		{"no namespace", event("test13", "", corev1.ObjectReference{APIVersion: "other/v1beta1", Kind: "FooBar", Namespace: "bar"}), false},
		{"cluster-scoped object outside default", event("test14", "foo", corev1.ObjectReference{APIVersion: "other/v1beta1", Kind: "FooBar"}), false},

		{"event with eventTime needs its reporter", event("test", metav1.NamespaceDefault, node, func(e *corev1.Event) { e.EventTime = eventTime }), false},
		{"valid new event", event("test", metav1.NamespaceSystem, node, newStyle), true},
		{"new event in default", event("test", metav1.NamespaceDefault, node, newStyle), true},
		{"new event about a cluster-scoped object elsewhere", event("test", "foo", node, newStyle), false},
		{"invalid reporting controller", event("test", metav1.NamespaceSystem, node, newStyle, func(e *corev1.Event) { e.ReportingController = "my-contr@ller" }), false},
		{"reporting instance too long", event("test", metav1.NamespaceSystem, node, newStyle, func(e *corev1.Event) { e.ReportingInstance = strings.Repeat("a", 129) }), false},
		{"action too long", event("test", metav1.NamespaceSystem, node, newStyle, func(e *corev1.Event) { e.Action = strings.Repeat("a", 129) }), false},
		{"reason too long", event("test", metav1.NamespaceSystem, node, newStyle, func(e *corev1.Event) { e.Reason = strings.Repeat("a", 129) }), false},
		{"message too long", event("test", metav1.NamespaceSystem, node, newStyle, func(e *corev1.Event) { e.Message = strings.Repeat("a", 1025) }), false},
		{"message at the limit", event("test", metav1.NamespaceSystem, node, newStyle, func(e *corev1.Event) { e.Message = strings.Repeat("a", 1024) }), true},
		{"missing action", event("test", metav1.NamespaceSystem, node, newStyle, func(e *corev1.Event) { e.Action = "" }), false},
		{"name with a colon (a path segment)", event("p.17a:1", metav1.NamespaceDefault, node), true},
		{"name with a slash", event("a/b", metav1.NamespaceDefault, node), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validateCreate(t, eventDef(), tt.event)
			if tt.valid != (len(errs) == 0) {
				t.Errorf("valid = %v, want %v (errors: %v)", len(errs) == 0, tt.valid, errs.ToAggregate())
			}
		})
	}
}

// The cases of TestPrintEvent in k8s.io/kubernetes
// pkg/printers/internalversion/printers_test.go, with the wide columns
// the server always sends.
func TestEventTable(t *testing.T) {
	daysAgo := func(d int) metav1.Time { return metav1.NewTime(time.Now().UTC().AddDate(0, 0, -d)) }
	microDaysAgo := func(d int) metav1.MicroTime { return metav1.NewMicroTime(time.Now().UTC().AddDate(0, 0, -d)) }
	pod := corev1.ObjectReference{Kind: "Pod", Name: "Pod Name", FieldPath: "spec.containers{foo}"}
	tests := []struct {
		name  string
		event corev1.Event
		want  []any
	}{
		{name: "basic event",
			event: corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "event2"}, Source: corev1.EventSource{Component: "kubelet", Host: "Node1"},
				InvolvedObject: pod, Reason: "Event Reason", Message: "Message Data", FirstTimestamp: daysAgo(3), LastTimestamp: daysAgo(2),
				Count: 6, Type: corev1.EventTypeNormal},
			want: []any{"2d", "Normal", "Event Reason", "pod/Pod Name", "spec.containers{foo}", "kubelet, Node1", "Message Data", "3d", int64(6), "event2"}},
		{name: "without firstTimestamp",
			event: corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "event3"}, Source: corev1.EventSource{Component: "kubelet", Host: "Node1"},
				InvolvedObject: pod, Reason: "Event Reason", Message: "Message Data", EventTime: microDaysAgo(3), LastTimestamp: daysAgo(3),
				Count: 1, Type: corev1.EventTypeNormal},
			want: []any{"3d", "Normal", "Event Reason", "pod/Pod Name", "spec.containers{foo}", "kubelet, Node1", "Message Data", "3d", int64(1), "event3"}},
		{name: "without lastTimestamp",
			event: corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "event4"}, Source: corev1.EventSource{Component: "kubelet", Host: "Node1"},
				InvolvedObject: pod, Reason: "Event Reason", Message: "Message Data", EventTime: microDaysAgo(3), FirstTimestamp: daysAgo(3),
				Count: 1, Type: corev1.EventTypeNormal},
			want: []any{"3d", "Normal", "Event Reason", "pod/Pod Name", "spec.containers{foo}", "kubelet, Node1", "Message Data", "3d", int64(1), "event4"}},
		{name: "without firstTimestamp and lastTimestamp",
			event: corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "event5"}, Source: corev1.EventSource{Component: "kubelet", Host: "Node1"},
				InvolvedObject: pod, Reason: "Event Reason", Message: "Message Data", EventTime: microDaysAgo(3),
				Count: 1, Type: corev1.EventTypeNormal},
			want: []any{"3d", "Normal", "Event Reason", "pod/Pod Name", "spec.containers{foo}", "kubelet, Node1", "Message Data", "3d", int64(1), "event5"}},
		{name: "without source",
			event: corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "event6"}, InvolvedObject: pod, Reason: "Event Reason", Message: "Message Data",
				EventTime: microDaysAgo(3), Count: 1, Type: corev1.EventTypeNormal, ReportingController: "kubelet", ReportingInstance: "test"},
			want: []any{"3d", "Normal", "Event Reason", "pod/Pod Name", "spec.containers{foo}", "kubelet, test", "Message Data", "3d", int64(1), "event6"}},
		// Not upstream's cases: a series and a count of 0, as printEvent
		// handles them, and an involved object without a name.
		{name: "series",
			event: corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "event7"}, InvolvedObject: corev1.ObjectReference{Kind: "Node"},
				EventTime: microDaysAgo(3), Series: &corev1.EventSeries{Count: 4, LastObservedTime: microDaysAgo(2)}, Type: corev1.EventTypeWarning,
				Message: "  trimmed  "},
			want: []any{"2d", "Warning", "", "node", "", "", "trimmed", "3d", int64(4), "event7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tableRow(t, eventDef(), &tt.event); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// The selectable fields of upstream's ToSelectableFields
// (pkg/registry/core/event/strategy.go): source falls back to the
// reporting controller.
func TestEventFields(t *testing.T) {
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: "u", APIVersion: "v1",
			ResourceVersion: "7", FieldPath: "spec.containers{c}"},
		Reason: "Started", ReportingController: "kubelet", Type: corev1.EventTypeNormal,
	}
	_, got, err := eventDef().getAttrs(e)
	if err != nil {
		t.Fatal(err)
	}
	want := fields.Set{
		"metadata.name": "e", "metadata.namespace": "ns",
		"involvedObject.kind": "Pod", "involvedObject.namespace": "ns", "involvedObject.name": "p", "involvedObject.uid": "u",
		"involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "7", "involvedObject.fieldPath": "spec.containers{c}",
		"reason": "Started", "reportingComponent": "kubelet", "source": "kubelet", "type": "Normal",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
	for label := range want {
		if _, _, err := eventDef().fieldLabelConversion(label, "x"); err != nil {
			t.Errorf("field selector %s refused: %v", label, err)
		}
	}
	if _, _, err := eventDef().fieldLabelConversion("message", "x"); err == nil {
		t.Error("field selector message accepted")
	}
}
