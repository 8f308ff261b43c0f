package registry

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// eventTTL is how long an event is kept, kube-apiserver's --event-ttl
// default: events must not fill a device's flash.
const eventTTL = time.Hour

func eventDef() *resourceDef {
	return &resourceDef{
		gvr:         corev1.SchemeGroupVersion.WithResource("events"),
		kind:        "Event",
		singular:    "event",
		namespaced:  true,
		shortNames:  []string{"ev"},
		keyPrefix:   "events",
		newFunc:     func() runtime.Object { return &corev1.Event{} },
		newListFunc: func() runtime.Object { return &corev1.EventList{} },
		fields:      eventFields,
		fieldLabels: []string{"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
			"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
			"reason", "reportingComponent", "source", "type"},
		// ValidateEventCreate (pkg/apis/core/validation/events.go) checks
		// the metadata of events.k8s.io/v1 requests only (see
		// validateEventRequest); for the others kube-apiserver's generic
		// ValidateCreate checks names are path segments.
		nameFunc:            path.ValidatePathSegmentName,
		validate:            validateEvent,
		validateRequest:     validateEventRequest,
		alsoServedAs:        []servedAs{eventsV1()},
		allowCreateOnUpdate: true,
		ttl:                 eventTTL,
		columns: []metav1.TableColumnDefinition{
			col("Last Seen", "string", corev1.Event{}.SwaggerDoc()["lastTimestamp"]),
			col("Type", "string", corev1.Event{}.SwaggerDoc()["type"]),
			col("Reason", "string", corev1.Event{}.SwaggerDoc()["reason"]),
			col("Object", "string", corev1.Event{}.SwaggerDoc()["involvedObject"]),
			wideCol("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
			wideCol("Source", "string", corev1.Event{}.SwaggerDoc()["source"]),
			col("Message", "string", corev1.Event{}.SwaggerDoc()["message"]),
			wideCol("First Seen", "string", corev1.Event{}.SwaggerDoc()["firstTimestamp"]),
			wideCol("Count", "string", corev1.Event{}.SwaggerDoc()["count"]),
			wideCol("Name", "string", metav1.ObjectMeta{}.SwaggerDoc()["name"]),
		},
		row: func(obj runtime.Object) []any { return eventRow(obj.(*corev1.Event)) },
	}
}

func eventFields(obj runtime.Object) fields.Set {
	e := obj.(*corev1.Event)
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

// Limits of the fields of events that carry an eventTime, upstream's.
const (
	eventReportingInstanceMax = 128
	eventActionMax            = 128
	eventReasonMax            = 128
	eventNoteMax              = 1024
)

// validateEvent is upstream's validation of core/v1 events
// (legacyValidateEvent in pkg/apis/core/validation/events.go): an event
// about a cluster-scoped object lives in "default" (or, for events with an
// eventTime, "kube-system"), otherwise in the object's namespace; events
// with an eventTime, written by the new events API's clients, also name
// their reporter, action and reason.
func validateEvent(obj runtime.Object) field.ErrorList {
	e := obj.(*corev1.Event)
	var errs field.ErrorList
	nsMismatch := field.Invalid(field.NewPath("involvedObject", "namespace"), e.InvolvedObject.Namespace, "does not match event.namespace")
	if e.EventTime.IsZero() {
		switch {
		case e.InvolvedObject.Namespace == "":
			if e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault {
				errs = append(errs, nsMismatch)
			}
		case e.InvolvedObject.Namespace != e.Namespace:
			errs = append(errs, nsMismatch)
		}
		return errs
	}
	if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
		errs = append(errs, nsMismatch)
	}
	reporter := field.NewPath("reportingComponent")
	if e.ReportingController == "" {
		errs = append(errs, field.Required(reporter, ""))
	}
	errs = append(errs, invalidEach(reporter, e.ReportingController, utilvalidation.IsQualifiedName(e.ReportingController))...)
	for _, f := range []struct {
		path     string
		value    string
		max      int
		required bool
	}{
		{"reportingInstance", e.ReportingInstance, eventReportingInstanceMax, true},
		{"action", e.Action, eventActionMax, true},
		{"reason", e.Reason, eventReasonMax, true},
		{"message", e.Message, eventNoteMax, false},
	} {
		if f.required && f.value == "" {
			errs = append(errs, field.Required(field.NewPath(f.path), ""))
		}
		if len(f.value) > f.max {
			errs = append(errs, field.Invalid(field.NewPath(f.path), "", fmt.Sprintf("can have at most %v characters", f.max)))
		}
	}
	return errs
}

func eventRow(e *corev1.Event) []any {
	first := age(e.FirstTimestamp)
	if e.FirstTimestamp.IsZero() {
		first = microAge(e.EventTime)
	}
	last := age(e.LastTimestamp)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	if e.Series != nil {
		last, count = microAge(e.Series.LastObservedTime), e.Series.Count
	} else if count == 0 {
		count = 1
	}
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	if e.Source.Host != "" {
		source += ", " + e.Source.Host
	} else if e.ReportingInstance != "" {
		source += ", " + e.ReportingInstance
	}
	object := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		object += "/" + e.InvolvedObject.Name
	}
	return []any{last, e.Type, e.Reason, object, e.InvolvedObject.FieldPath, source, strings.TrimSpace(e.Message), first, int64(count), e.Name}
}
