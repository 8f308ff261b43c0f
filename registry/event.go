package registry

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
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
		validate:            validateEvent,
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

func validateEvent(obj runtime.Object) field.ErrorList {
	e := obj.(*corev1.Event)
	ns := field.NewPath("involvedObject", "namespace")
	switch {
	case e.InvolvedObject.Namespace == "":
		// Cluster-scoped objects' events live in "default", as upstream.
		if e.Namespace != metav1.NamespaceDefault {
			return field.ErrorList{field.Invalid(ns, e.InvolvedObject.Namespace, "does not match event.namespace")}
		}
	case e.InvolvedObject.Namespace != e.Namespace:
		return field.ErrorList{field.Invalid(ns, e.InvolvedObject.Namespace, "does not match event.namespace")}
	}
	return nil
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
	object := fmt.Sprintf("%s/%s", strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name)
	return []any{last, e.Type, e.Reason, object, e.InvolvedObject.FieldPath, source, strings.TrimSpace(e.Message), first, int64(count), e.Name}
}
