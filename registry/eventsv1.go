package registry

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// eventsV1 serves core/v1 Events as events.k8s.io/v1 Events from the same
// store, as kube-apiserver does: one key space (/events), one watch cache,
// each version readable, writable and watchable, an Event written in one
// read in the other. Upstream registers the internal core.Event as the
// events group's internal type too (pkg/apis/events/register.go);
// kubestore's internal type is corev1.Event.
func eventsV1() servedAs {
	return servedAs{
		gv:             eventsv1.SchemeGroupVersion,
		newFunc:        func() runtime.Object { return &eventsv1.Event{} },
		listFunc:       func() runtime.Object { return &eventsv1.EventList{} },
		addConversions: addEventsV1Conversions,
	}
}

// eventsV1FieldLabels maps the field selectors of events.k8s.io/v1 to the
// stored Event's, upstream's AddFieldLabelConversionsForEvent
// (pkg/apis/events/v1/conversion.go).
var eventsV1FieldLabels = map[string]string{
	"metadata.name":             "metadata.name",
	"metadata.namespace":        "metadata.namespace",
	"reason":                    "reason",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
	"reportingController":       "reportingComponent",
	"type":                      "type",
}

func addEventsV1Conversions(s *runtime.Scheme) error {
	for _, err := range []error{
		s.AddConversionFunc((*eventsv1.Event)(nil), (*corev1.Event)(nil), func(a, b any, _ conversion.Scope) error {
			eventFromV1(a.(*eventsv1.Event), b.(*corev1.Event))
			return nil
		}),
		s.AddConversionFunc((*corev1.Event)(nil), (*eventsv1.Event)(nil), func(a, b any, _ conversion.Scope) error {
			eventToV1(a.(*corev1.Event), b.(*eventsv1.Event))
			return nil
		}),
		s.AddConversionFunc((*eventsv1.EventList)(nil), (*corev1.EventList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*eventsv1.EventList), b.(*corev1.EventList)
			out.ListMeta = in.ListMeta
			out.Items = make([]corev1.Event, len(in.Items))
			for i := range in.Items {
				eventFromV1(&in.Items[i], &out.Items[i])
			}
			return nil
		}),
		s.AddConversionFunc((*corev1.EventList)(nil), (*eventsv1.EventList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*corev1.EventList), b.(*eventsv1.EventList)
			out.ListMeta = in.ListMeta
			out.Items = make([]eventsv1.Event, len(in.Items))
			for i := range in.Items {
				eventToV1(&in.Items[i], &out.Items[i])
			}
			return nil
		}),
		s.AddFieldLabelConversionFunc(eventsv1.SchemeGroupVersion.WithKind("Event"), func(label, value string) (string, string, error) {
			mapped, ok := eventsV1FieldLabels[label]
			if !ok {
				return "", "", fmt.Errorf("field label not supported: %s", label)
			}
			return mapped, value, nil
		}),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// eventFromV1 is upstream's Convert_v1_Event_To_core_Event: note is the
// message, regarding the involved object, the deprecated fields the legacy
// ones.
func eventFromV1(in *eventsv1.Event, out *corev1.Event) {
	*out = corev1.Event{
		TypeMeta:            out.TypeMeta,
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
}

// eventToV1 is upstream's Convert_core_Event_To_v1_Event.
func eventToV1(in *corev1.Event, out *eventsv1.Event) {
	*out = eventsv1.Event{
		TypeMeta:                 out.TypeMeta,
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
}

// validateEventRequest is upstream's ValidateEventCreate and
// ValidateEventUpdate beyond the legacy rules (pkg/apis/core/validation/
// events.go): core/v1 requests keep the legacy rules alone for backwards
// compatibility; events.k8s.io/v1 requests must set eventTime and a type,
// leave the deprecated fields unset, and may not change what an Event
// reports once written.
func validateEventRequest(gv schema.GroupVersion, obj, old runtime.Object) field.ErrorList {
	if gv.Group != eventsv1.GroupName {
		return nil
	}
	e := obj.(*corev1.Event)
	var errs field.ErrorList
	if old != nil {
		o := old.(*corev1.Event)
		if !reflect.DeepEqual(e.Series, o.Series) {
			errs = append(errs, validateEventSeries(e)...)
		}
		for _, f := range []struct {
			path     string
			now, was any
		}{
			{"involvedObject", e.InvolvedObject, o.InvolvedObject},
			{"reason", e.Reason, o.Reason},
			{"message", e.Message, o.Message},
			{"source", e.Source, o.Source},
			{"firstTimestamp", e.FirstTimestamp, o.FirstTimestamp},
			{"lastTimestamp", e.LastTimestamp, o.LastTimestamp},
			{"count", e.Count, o.Count},
			{"type", e.Type, o.Type},
			{"eventTime", e.EventTime, o.EventTime},
			{"action", e.Action, o.Action},
			{"related", e.Related, o.Related},
			{"reportingController", e.ReportingController, o.ReportingController},
			{"reportingInstance", e.ReportingInstance, o.ReportingInstance},
		} {
			errs = append(errs, apimachineryvalidation.ValidateImmutableField(f.now, f.was, field.NewPath(f.path))...)
		}
		return errs
	}
	// ValidateEventCreate's ValidateObjectMeta with NameIsDNSSubdomain;
	// the rest of the metadata is checked for every version.
	if len(e.GenerateName) != 0 {
		errs = append(errs, invalidEach(field.NewPath("metadata", "generateName"), e.GenerateName, apimachineryvalidation.NameIsDNSSubdomain(e.GenerateName, true))...)
	}
	if len(e.Name) != 0 {
		errs = append(errs, invalidEach(field.NewPath("metadata", "name"), e.Name, apimachineryvalidation.NameIsDNSSubdomain(e.Name, false))...)
	}
	errs = append(errs, validateEventSeries(e)...)
	if e.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", e.Type)))
	}
	if !e.FirstTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !e.LastTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if e.Count != 0 {
		errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if e.Source.Component != "" || e.Source.Host != "" {
		errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return errs
}

func validateEventSeries(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if e.Series != nil {
		if e.Series.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
		}
		if e.Series.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
		}
	}
	return errs
}
