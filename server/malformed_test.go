package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// badCase is one malformed request and the refusal it must get.
type malformedCase struct {
	name        string
	method      string
	path        string // with query
	contentType string // default application/json when there is a body
	accept      string
	body        []byte
	code        int
	reason      metav1.StatusReason
	// mention are substrings the Status message must contain: the field,
	// parameter or value at fault.
	mention []string
}

const (
	mfNS         = "badinput"
	mfCMs        = "/api/v1/namespaces/" + mfNS + "/configmaps"
	mfCM         = mfCMs + "/existing"
	mfPods       = "/api/v1/namespaces/" + mfNS + "/pods"
	mfSecrets    = "/api/v1/namespaces/" + mfNS + "/secrets"
	mfServices   = "/api/v1/namespaces/" + mfNS + "/services"
	mfEvents     = "/api/v1/namespaces/" + mfNS + "/events"
	mfLeases     = "/apis/coordination.k8s.io/v1/namespaces/" + mfNS + "/leases"
	mfSlices     = "/apis/discovery.k8s.io/v1/namespaces/" + mfNS + "/endpointslices"
	mfAccounts   = "/api/v1/namespaces/" + mfNS + "/serviceaccounts"
	mfNamespaces = "/api/v1/namespaces"
	mfNodes      = "/api/v1/nodes"
	mfCRDs       = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

	mfJSON      = "application/json"
	mfYAML      = "application/yaml"
	mfProto     = "application/vnd.kubernetes.protobuf"
	mfMerge     = "application/merge-patch+json"
	mfJSONPatch = "application/json-patch+json"
	mfSMP       = "application/strategic-merge-patch+json"
	mfApply     = "application/apply-patch+yaml"
)

// cm is a ConfigMap body named name with extra top-level JSON members.
func mfConfigMap(name string, extra ...string) []byte {
	s := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"}`
	for _, e := range extra {
		s += "," + e
	}
	return []byte(s + "}")
}

// cmMeta is a ConfigMap body with the given metadata members.
func mfConfigMapMeta(meta string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{` + meta + `}}`)
}

// jsonPatchRefused is upstream's whole message for a JSON patch that cannot
// be applied: the patch library's error is dropped (apierrors.
// NewGenericServerResponse keeps no cause for a 422).
const mfJSONPatchRefused = "the server rejected our request due to an error in our request"

func mfNested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func malformedCases() []malformedCase {
	big := bytes.Repeat([]byte("x"), 4<<20)
	bigCM := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"` + string(big) + `"}}`)
	overMiB := strings.Repeat("y", 1<<20+1)
	longName := strings.Repeat("a", 254)
	longLabel := strings.Repeat("v", 64)
	bigAnnotation := strings.Repeat("z", 256<<10+1)
	garbageContinue := base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v9","rv":1,"start":"x"}`))

	var cases []malformedCase
	add := func(c malformedCase) { cases = append(cases, c) }
	post := func(name, path, ct string, body []byte, code int, reason metav1.StatusReason, mention ...string) {
		add(malformedCase{name: name, method: http.MethodPost, path: path, contentType: ct, body: body, code: code, reason: reason, mention: mention})
	}
	get := func(name, path string, code int, reason metav1.StatusReason, mention ...string) {
		add(malformedCase{name: name, method: http.MethodGet, path: path, code: code, reason: reason, mention: mention})
	}
	patch := func(name, path, ct string, body []byte, code int, reason metav1.StatusReason, mention ...string) {
		add(malformedCase{name: name, method: http.MethodPatch, path: path, contentType: ct, body: body, code: code, reason: reason, mention: mention})
	}
	put := func(name, path string, body []byte, code int, reason metav1.StatusReason, mention ...string) {
		add(malformedCase{name: name, method: http.MethodPut, path: path, contentType: mfJSON, body: body, code: code, reason: reason, mention: mention})
	}
	bad, invalid := metav1.StatusReasonBadRequest, metav1.StatusReasonInvalid

	// Invalid JSON bodies.
	post("json: empty body", mfCMs, mfJSON, nil, 400, bad, "json parse error")
	post("json: unterminated object", mfCMs, mfJSON, []byte(`{"apiVersion":"v1","kind":"ConfigMap"`), 400, bad, "unexpected end of JSON input")
	post("json: missing value", mfCMs, mfJSON, []byte(`{"apiVersion":}`), 400, bad, "invalid character")
	post("json: array", mfCMs, mfJSON, []byte(`[]`), 400, bad, "cannot unmarshal array")
	post("json: string", mfCMs, mfJSON, []byte(`"configmap"`), 400, bad, "cannot unmarshal string")
	post("json: number", mfCMs, mfJSON, []byte(`42`), 400, bad, "cannot unmarshal number")
	post("json: null", mfCMs, mfJSON, []byte(`null`), 422, invalid, "metadata.name", "name or generateName is required")
	post("json: single quotes", mfCMs, mfJSON, []byte(`{'apiVersion':'v1'}`), 400, bad, "invalid character")
	post("json: trailing comma", mfCMs, mfJSON, []byte(`{"apiVersion":"v1","kind":"ConfigMap",}`), 400, bad, "invalid character")
	post("json: garbage after object", mfCMs, mfJSON, append(mfConfigMap("trailing"), []byte(`garbage`)...), 400, bad, "invalid character")
	post("json: invalid UTF-8", mfCMs, mfJSON, []byte("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"\xff\xfe\"}}"), 422, invalid, "metadata.name")
	post("json: data value is a number", mfCMs, mfJSON, mfConfigMap("num", `"data":{"a":1}`), 400, bad, "ConfigMap.data")
	post("json: data is a list", mfCMs, mfJSON, mfConfigMap("list", `"data":["a"]`), 400, bad, "ConfigMap.data")
	post("json: metadata is a string", mfCMs, mfJSON, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":"x"}`), 400, bad, "ObjectMeta")
	post("json: labels is a list", mfCMs, mfJSON, mfConfigMapMeta(`"name":"l","labels":["a"]`), 400, bad, "labels")
	post("json: binaryData not base64", mfCMs, mfJSON, mfConfigMap("b64", `"binaryData":{"a":"!!!"}`), 400, bad, "illegal base64")
	post("json: secret data not base64", mfSecrets, mfJSON, []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"not base64!"}}`), 400, bad, "illegal base64")
	post("json: pod containers is an object", mfPods, mfJSON, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":{}}}`), 400, bad, "containers")
	post("json: lease duration is a string", mfLeases, mfJSON, []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"leaseDurationSeconds":"ten"}}`), 400, bad, "leaseDurationSeconds")
	post("json: deeply nested unknown field", mfCMs, mfJSON, mfConfigMap("deep", `"x":`+mfNested(100000)), 400, bad, "max depth")
	post("json: deeply nested unknown field, strict", mfCMs+"?fieldValidation=Strict", mfJSON, mfConfigMap("deep", `"x":`+mfNested(100000)), 400, bad, "max depth")
	post("json: deeply nested data value", mfCMs, mfJSON, mfConfigMap("deep", `"data":{"a":`+mfNested(100000)+`}`), 400, bad, "max depth")

	// Invalid YAML bodies.
	post("yaml: mapping in a scalar", mfCMs, mfYAML, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: name: x\n"), 400, bad, "yaml")
	post("yaml: unclosed flow sequence", mfCMs, mfYAML, []byte("apiVersion: v1\nkind: [ConfigMap\n"), 400, bad, "yaml")
	post("yaml: tab indentation", mfCMs, mfYAML, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n"), 400, bad, "yaml")
	post("yaml: a list", mfCMs, mfYAML, []byte("- a\n- b\n"), 400, bad, "cannot unmarshal array")
	post("yaml: a scalar", mfCMs, mfYAML, []byte("just a string\n"), 400, bad, "cannot unmarshal string")
	post("yaml: duplicate key, strict", mfCMs+"?fieldValidation=Strict", mfYAML, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n"), 400, bad, `"name"`, "already set")
	post("yaml: unknown field, strict", mfCMs+"?fieldValidation=Strict", mfYAML, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nspec: {}\n"), 400, bad, `unknown field "spec"`)
	post("yaml: anchors bomb", mfCMs, mfYAML, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\na: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"), 400, bad, "yaml")

	// Invalid protobuf bodies.
	post("protobuf: no magic", mfCMs, mfProto, []byte("hello, world"), 400, bad, "protobuf")
	post("protobuf: magic only", mfCMs, mfProto, []byte("k8s\x00"), 400, bad, "")
	post("protobuf: magic and garbage", mfCMs, mfProto, append([]byte("k8s\x00"), 0xff, 0xff, 0xff, 0xff, 0x0f), 400, bad, "")
	post("protobuf: truncated Unknown", mfCMs, mfProto, append([]byte("k8s\x00"), 0x0a, 0x40, 0x0a), 400, bad, "")
	post("protobuf: JSON in protobuf clothing", mfCMs, mfProto, mfConfigMap("p"), 400, bad, "protobuf")

	// Wrong kind or apiVersion in the body.
	post("kind: Secret to configmaps", mfCMs, mfJSON, []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"k"}}`), 400, bad, "Secret", "ConfigMap")
	post("kind: unknown kind", mfCMs, mfJSON, []byte(`{"apiVersion":"v1","kind":"Gadget","metadata":{"name":"k"}}`), 400, bad, "Gadget")
	post("kind: unknown version", mfCMs, mfJSON, []byte(`{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"k"}}`), 400, bad, "v2")
	post("kind: other group", mfCMs, mfJSON, []byte(`{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"k"}}`), 400, bad, "apps/v1")
	post("kind: lease as core/v1", mfLeases, mfJSON, []byte(`{"apiVersion":"v1","kind":"Lease","metadata":{"name":"k"}}`), 400, bad, "Lease")
	post("kind: pod to configmaps", mfCMs, mfJSON, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"k"}}`), 400, bad, "Pod", "ConfigMap")
	post("kind: List to configmaps", mfCMs, mfJSON, []byte(`{"apiVersion":"v1","kind":"List","items":[]}`), 400, bad, "List")
	post("kind: Status to configmaps", mfCMs, mfJSON, []byte(`{"apiVersion":"v1","kind":"Status"}`), 400, bad, "Status")
	post("kind: apiVersion not a string", mfCMs, mfJSON, []byte(`{"apiVersion":1,"kind":"ConfigMap","metadata":{"name":"k"}}`), 400, bad, "apiVersion")

	// Names, labels, annotations and data keys that break the rules.
	post("name: upper case", mfCMs, mfJSON, mfConfigMap("UPPER"), 422, invalid, "metadata.name", "UPPER")
	post("name: underscore", mfCMs, mfJSON, mfConfigMap("a_b"), 422, invalid, "metadata.name", "a_b")
	post("name: leading dash", mfCMs, mfJSON, mfConfigMap("-lead"), 422, invalid, "metadata.name")
	post("name: trailing dot", mfCMs, mfJSON, mfConfigMap("trail."), 422, invalid, "metadata.name")
	post("name: too long", mfCMs, mfJSON, mfConfigMap(longName), 422, invalid, "metadata.name", "253")
	post("name: missing", mfCMs, mfJSON, mfConfigMapMeta(`"labels":{"a":"b"}`), 422, invalid, "metadata.name", "name or generateName is required")
	post("name: dot", mfCMs, mfJSON, mfConfigMap("."), 422, invalid, "metadata.name")
	post("name: dotdot", mfCMs, mfJSON, mfConfigMap(".."), 422, invalid, "metadata.name")
	post("name: percent", mfCMs, mfJSON, mfConfigMap("a%b"), 422, invalid, "metadata.name")
	post("name: slash", mfCMs, mfJSON, mfConfigMap("a/b"), 422, invalid, "metadata.name")
	post("name: generateName invalid", mfCMs, mfJSON, mfConfigMapMeta(`"generateName":"Bad_"`), 422, invalid, "metadata.generateName")
	post("name: pod name not a DNS subdomain", mfPods, mfJSON, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"P!"},"spec":{"containers":[{"name":"c","image":"i"}]}}`), 422, invalid, "metadata.name")
	post("name: namespace with dot", mfNamespaces, mfJSON, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a.b"}}`), 422, invalid, "metadata.name", "a.b")
	post("name: service name not a DNS label", mfServices, mfJSON, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc.a"},"spec":{"ports":[{"port":80}]}}`), 422, invalid, "metadata.name", "svc.a")
	post("label: key with space", mfCMs, mfJSON, mfConfigMapMeta(`"name":"l1","labels":{"a b":"c"}`), 422, invalid, "metadata.labels", "a b")
	post("label: value too long", mfCMs, mfJSON, mfConfigMapMeta(`"name":"l2","labels":{"a":"`+longLabel+`"}`), 422, invalid, "metadata.labels", "63")
	post("label: value with slash", mfCMs, mfJSON, mfConfigMapMeta(`"name":"l3","labels":{"a":"b/c"}`), 422, invalid, "metadata.labels", "b/c")
	post("label: prefix upper case", mfCMs, mfJSON, mfConfigMapMeta(`"name":"l4","labels":{"Example.COM/a":"b"}`), 422, invalid, "metadata.labels", "Example.COM")
	post("label: empty key", mfCMs, mfJSON, mfConfigMapMeta(`"name":"l5","labels":{"":"b"}`), 422, invalid, "metadata.labels")
	post("label: two slashes", mfCMs, mfJSON, mfConfigMapMeta(`"name":"l6","labels":{"a/b/c":"d"}`), 422, invalid, "metadata.labels", "a/b/c")
	post("annotation: key with space", mfCMs, mfJSON, mfConfigMapMeta(`"name":"a1","annotations":{"a b":"c"}`), 422, invalid, "metadata.annotations", "a b")
	post("annotation: over 256KiB", mfCMs, mfJSON, mfConfigMapMeta(`"name":"a2","annotations":{"a":"`+bigAnnotation+`"}`), 422, invalid, "metadata.annotations", "Too long", "262144")
	post("finalizer: not qualified", mfCMs, mfJSON, mfConfigMapMeta(`"name":"f1","finalizers":["Not Valid"]`), 422, invalid, "metadata.finalizers")
	post("data: key with space", mfCMs, mfJSON, mfConfigMap("d1", `"data":{"a b":"c"}`), 422, invalid, "data[a b]")
	post("data: key in data and binaryData", mfCMs, mfJSON, mfConfigMap("d2", `"data":{"k":"v"},"binaryData":{"k":"dg=="}`), 422, invalid, "binaryData[k]", "duplicate")
	post("data: over 1MiB", mfCMs, mfJSON, mfConfigMap("d3", `"data":{"a":"`+overMiB+`"}`), 422, invalid, "Too long", "1048576")
	post("secret: key with slash", mfSecrets, mfJSON, []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1"},"stringData":{"a/b":"c"}}`), 422, invalid, "data[a/b]")
	post("secret: tls type without keys", mfSecrets, mfJSON, []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s2"},"type":"kubernetes.io/tls"}`), 422, invalid, "data[tls.crt]")
	post("pod: no containers", mfPods, mfJSON, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},"spec":{"containers":[]}}`), 422, invalid, "spec.containers")
	post("pod: container without image", mfPods, mfJSON, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p2"},"spec":{"containers":[{"name":"c"}]}}`), 422, invalid, "spec.containers[0].image")
	post("pod: bad restartPolicy", mfPods, mfJSON, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p3"},"spec":{"restartPolicy":"Sometimes","containers":[{"name":"c","image":"i"}]}}`), 422, invalid, "spec.restartPolicy", "Sometimes")
	post("service: port out of range", mfServices, mfJSON, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":70000}]}}`), 422, invalid, "spec.ports[0].port")
	post("service: bad type", mfServices, mfJSON, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"type":"Magic","ports":[{"port":80}]}}`), 422, invalid, "spec.type", "Magic")
	post("lease: negative duration", mfLeases, mfJSON, []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"leaseDurationSeconds":-5}}`), 422, invalid, "spec.leaseDurationSeconds")
	post("endpointslice: bad address type", mfSlices, mfJSON, []byte(`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"e"},"addressType":"IPv5","endpoints":[]}`), 422, invalid, "addressType", "IPv5")
	post("event: no involved object", mfEvents, mfJSON, []byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"}}`), 422, invalid, "involvedObject")
	post("node: bad taint effect", mfNodes, mfJSON, []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"spec":{"taints":[{"key":"k","effect":"Maybe"}]}}`), 422, invalid, "spec.taints[0].effect", "Maybe")
	post("serviceaccount: bad name", mfAccounts, mfJSON, []byte(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"SA"}}`), 422, invalid, "metadata.name")

	// Unknown and duplicate fields with fieldValidation=Strict, and bad
	// fieldValidation values.
	strict := mfCMs + "?fieldValidation=Strict"
	post("strict: unknown top-level field", strict, mfJSON, mfConfigMap("u1", `"spec":{}`), 400, bad, `unknown field "spec"`)
	post("strict: unknown metadata field", strict, mfJSON, mfConfigMapMeta(`"name":"u2","nmae":"x"`), 400, bad, `unknown field "metadata.nmae"`)
	post("strict: duplicate field", strict, mfJSON, mfConfigMapMeta(`"name":"u3","name":"u4"`), 400, bad, `duplicate field "metadata.name"`)
	post("strict: duplicate data key", strict, mfJSON, mfConfigMap("u5", `"data":{"a":"1","a":"2"}`), 400, bad, `duplicate field "data.a"`)
	post("strict: unknown pod spec field", mfPods+"?fieldValidation=Strict", mfJSON, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containerz":[]}}`), 400, bad, `unknown field "spec.containerz"`)
	post("strict: case-mismatched field", strict, mfJSON, mfConfigMap("u6", `"Data":{"a":"b"}`), 400, bad, `unknown field "Data"`)
	post("fieldValidation: unknown value", mfCMs+"?fieldValidation=Loose", mfJSON, mfConfigMap("u7"), 422, invalid, "fieldValidation", "Loose")
	put("strict: unknown field on update", mfCM+"?fieldValidation=Strict", mfConfigMap("existing", `"spec":{}`), 400, bad, `unknown field "spec"`)
	patch("strict: unknown field in merge patch", mfCM+"?fieldValidation=Strict", mfMerge, []byte(`{"spec":{"a":1}}`), 422, invalid, `unknown field "spec"`)
	patch("strict: unknown field in apply", mfCM+"?fieldManager=t&fieldValidation=Strict", mfApply, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\nspec: {}\n"), 400, bad, "spec")

	// Bodies over the size limit.
	post("size: 4MiB create", mfCMs, mfJSON, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")
	put("size: 4MiB update", mfCM, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")
	patch("size: 4MiB merge patch", mfCM, mfMerge, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")
	patch("size: 4MiB apply", mfCM+"?fieldManager=t", mfApply, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")
	post("size: 4MiB yaml", mfCMs, mfYAML, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")

	// resourceVersion and continue tokens that are garbage or from the future.
	get("rv: garbage on list", mfCMs+"?resourceVersion=abc", 400, bad, "resourceVersion", "abc")
	get("rv: negative on list", mfCMs+"?resourceVersion=-1", 400, bad, "resourceVersion", "-1")
	get("rv: garbage on get", mfCM+"?resourceVersion=xyz", 400, bad, "resourceVersion", "xyz")
	get("rv: garbage on watch", mfCMs+"?watch=1&resourceVersion=zzz", 400, bad, "resourceVersion", "zzz")
	get("rv: exact without value", mfCMs+"?resourceVersionMatch=Exact", 422, invalid, "resourceVersionMatch")
	get("rv: unknown match", mfCMs+"?resourceVersion=1&resourceVersionMatch=Sometimes", 422, invalid, "resourceVersionMatch", "Sometimes")
	get("rv: match with watch", mfCMs+"?watch=1&resourceVersion=1&resourceVersionMatch=Exact", 422, invalid, "resourceVersionMatch")
	put("rv: garbage on update", mfCM, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","resourceVersion":"abc"}}`), 400, bad, "metadata.resourceVersion", "abc")
	post("rv: set on create", mfCMs, mfJSON, mfConfigMapMeta(`"name":"rvc","resourceVersion":"5"`), 400, bad, "metadata.resourceVersion", "must not be set on create")
	post("rv: garbage on create", mfCMs, mfJSON, mfConfigMapMeta(`"name":"rvd","resourceVersion":"abc"`), 400, bad, "metadata.resourceVersion", "abc")
	post("rv: set on namespace create", mfNamespaces, mfJSON, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"rvns","resourceVersion":"5"}}`), 400, bad, "metadata.resourceVersion")
	put("rv: garbage on status update", "/api/v1/namespaces/"+mfNS+"/pods/ghost/status", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"ghost","resourceVersion":"x"}}`), 404, metav1.StatusReasonNotFound, "ghost")
	put("rv: garbage on namespace update", mfNamespaces+"/"+mfNS, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+mfNS+`","resourceVersion":"x"}}`), 400, bad, "metadata.resourceVersion")
	put("rv: stale on update", mfCM, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","resourceVersion":"1"}}`), 409, metav1.StatusReasonConflict, "existing", "modified")
	put("rv: future on update", mfCM, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","resourceVersion":"999999999"}}`), 409, metav1.StatusReasonConflict, "existing")
	add(malformedCase{name: "rv: delete precondition mismatch", method: http.MethodDelete, path: mfCM, contentType: mfJSON,
		body: []byte(`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}`), code: 409, reason: metav1.StatusReasonConflict, mention: []string{"ResourceVersion in the precondition (1)"}})
	add(malformedCase{name: "uid: delete precondition mismatch", method: http.MethodDelete, path: mfCM, contentType: mfJSON,
		body: []byte(`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`), code: 409, reason: metav1.StatusReasonConflict, mention: []string{"UID in the precondition"}})
	get("continue: garbage", mfCMs+"?limit=1&continue=garbage", 400, bad, "continue")
	get("continue: not JSON", mfCMs+"?limit=1&continue="+base64.RawURLEncoding.EncodeToString([]byte("not json")), 400, bad, "continue")
	get("continue: unknown version", mfCMs+"?limit=1&continue="+garbageContinue, 400, bad, "continue")
	get("continue: key escapes the prefix", mfCMs+"?limit=1&continue="+base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":1,"start":"../../secrets/"}`)), 400, bad, "continue")
	get("continue: with resourceVersion", mfCMs+"?limit=1&resourceVersion=1&continue="+base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":1,"start":"a"}`)), 400, bad, "resource version", "continue")
	get("continue: with watch", mfCMs+"?watch=1&continue=abc", 422, invalid, "continue")
	get("limit: not a number", mfCMs+"?limit=ten", 400, bad, "limit")
	get("limit: overflow", mfCMs+"?limit=99999999999999999999", 400, bad, "limit")

	// Bad label and field selectors.
	get("labelSelector: unbalanced paren", mfCMs+"?labelSelector=a+in+(b", 400, bad, "labelSelector", "a in (b")
	get("labelSelector: bare operator", mfCMs+"?labelSelector==b", 400, bad, "labelSelector")
	get("labelSelector: double bang", mfCMs+"?labelSelector=!!a", 400, bad, "labelSelector")
	get("labelSelector: bad key", mfCMs+"?labelSelector=a%20b%3Dc", 400, bad, "labelSelector")
	get("labelSelector: bad value", mfCMs+"?labelSelector=a%3Db%2Fc", 400, bad, "labelSelector")
	get("labelSelector: gt with text", mfCMs+"?labelSelector=a%3Ex", 400, bad, "labelSelector")
	get("labelSelector: on watch", mfCMs+"?watch=1&labelSelector=a+in+(", 400, bad, "labelSelector")
	get("fieldSelector: unsupported field", mfCMs+"?fieldSelector=data.a%3Db", 400, bad, "data.a", "not supported")
	get("fieldSelector: pod field on configmaps", mfCMs+"?fieldSelector=spec.nodeName%3Dn", 400, bad, "spec.nodeName")
	get("fieldSelector: unsupported pod field", mfPods+"?fieldSelector=spec.bogus%3Dn", 400, bad, "spec.bogus")
	get("fieldSelector: no operator", mfCMs+"?fieldSelector=metadata.name", 400, bad, "fieldSelector")
	get("fieldSelector: set operator", mfCMs+"?fieldSelector=metadata.name+in+(a)", 400, bad, "fieldSelector")
	get("fieldSelector: on watch", mfCMs+"?watch=1&fieldSelector=bogus%3D1", 400, bad, "bogus")
	get("fieldSelector: on nodes", mfNodes+"?fieldSelector=spec.nodeName%3Dx", 400, bad, "spec.nodeName")
	get("fieldSelector: on events", mfEvents+"?fieldSelector=involvedObject.bogus%3Dx", 400, bad, "involvedObject.bogus")

	// Bad patch documents.
	patch("json-patch: not an array", mfCM, mfJSONPatch, []byte(`{"op":"add"}`), 400, bad, "cannot unmarshal object")
	patch("json-patch: unknown op", mfCM, mfJSONPatch, []byte(`[{"op":"frobnicate","path":"/data/a","value":"b"}]`), 422, invalid, mfJSONPatchRefused)
	patch("json-patch: missing path", mfCM, mfJSONPatch, []byte(`[{"op":"add","value":"b"}]`), 422, invalid, mfJSONPatchRefused)
	patch("json-patch: path to nowhere", mfCM, mfJSONPatch, []byte(`[{"op":"replace","path":"/nowhere/deep","value":"b"}]`), 422, invalid, mfJSONPatchRefused)
	patch("json-patch: remove missing", mfCM, mfJSONPatch, []byte(`[{"op":"remove","path":"/data/missing"}]`), 422, invalid, mfJSONPatchRefused)
	patch("json-patch: failed test", mfCM, mfJSONPatch, []byte(`[{"op":"test","path":"/data/k","value":"other"}]`), 422, invalid, mfJSONPatchRefused)
	patch("json-patch: invalid JSON", mfCM, mfJSONPatch, []byte(`[{"op":`), 400, bad, "")
	patch("json-patch: value of wrong type", mfCM, mfJSONPatch, []byte(`[{"op":"add","path":"/data/n","value":1}]`), 422, invalid, "ConfigMap.data")
	patch("json-patch: change kind", mfCM, mfJSONPatch, []byte(`[{"op":"replace","path":"/apiVersion","value":"v9"}]`), 422, invalid, "v9")
	patch("merge: invalid JSON", mfCM, mfMerge, []byte(`{"data":`), 400, bad, "")
	patch("merge: not an object", mfCM, mfMerge, []byte(`["a"]`), 400, bad, "")
	patch("merge: rename", mfCM, mfMerge, []byte(`{"metadata":{"name":"other"}}`), 400, bad, "name", "other")
	patch("merge: move namespace", mfCM, mfMerge, []byte(`{"metadata":{"namespace":"default"}}`), 400, bad, "namespace")
	patch("merge: bad label", mfCM, mfMerge, []byte(`{"metadata":{"labels":{"a b":"c"}}}`), 422, invalid, "metadata.labels")
	patch("merge: data number", mfCM, mfMerge, []byte(`{"data":{"a":1}}`), 422, invalid, "ConfigMap.data")
	patch("strategic: invalid JSON", mfCM, mfSMP, []byte(`{{`), 400, bad, "")
	patch("strategic: unknown directive", mfCM, mfSMP, []byte(`{"data":{"$patch":"explode"}}`), 400, bad, "explode")
	patch("strategic: retainKeys not a list", mfCM, mfSMP, []byte(`{"$retainKeys":"x"}`), 400, bad, "retainKeys")
	patch("strategic: a list", mfCM, mfSMP, []byte(`[1,2]`), 400, bad, "")
	patch("apply: invalid YAML", mfCM+"?fieldManager=t", mfApply, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: name: existing\n"), 400, bad, "yaml")
	patch("apply: no fieldManager", mfCM, mfApply, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\n"), 422, invalid, "fieldManager")
	patch("apply: no kind", mfCM+"?fieldManager=t", mfApply, []byte("apiVersion: v1\nmetadata:\n  name: existing\n"), 400, bad, "invalid object type")
	patch("apply: wrong kind", mfCM+"?fieldManager=t", mfApply, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: existing\n"), 400, bad, "Secret")
	patch("apply: name mismatch", mfCM+"?fieldManager=t", mfApply, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"), 400, bad, "other")
	patch("apply: fieldManager too long", mfCM+"?fieldManager="+strings.Repeat("m", 129), mfApply, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\n"), 422, invalid, "fieldManager")
	patch("apply: force on merge patch", mfCM+"?force=true", mfMerge, []byte(`{"data":{"a":"b"}}`), 422, invalid, "force")
	patch("patch: unsupported patch type", mfCM, "application/x-patch", []byte(`{}`), 415, metav1.StatusReasonUnsupportedMediaType, "Unsupported Media Type")
	patch("patch: no content type", mfCM, "-", []byte(`{}`), 415, metav1.StatusReasonUnsupportedMediaType, "")

	// Watch parameters out of range.
	get("watch: negative timeoutSeconds", mfCMs+"?watch=1&timeoutSeconds=-1", 400, bad, "timeoutSeconds", "-1")
	get("watch: timeoutSeconds not a number", mfCMs+"?watch=1&timeoutSeconds=soon", 400, bad, "timeoutSeconds")
	get("watch: sendInitialEvents without match", mfCMs+"?watch=1&sendInitialEvents=true", 422, invalid, "resourceVersionMatch")
	get("watch: sendInitialEvents on list", mfCMs+"?sendInitialEvents=true&resourceVersionMatch=NotOlderThan", 422, invalid, "sendInitialEvents")
	get("watch: sendInitialEvents not a bool", mfCMs+"?watch=1&sendInitialEvents=often", 422, invalid, "resourceVersionMatch", "sendInitialEvents")
	get("watch: resourceVersionMatch without sendInitialEvents", mfCMs+"?watch=1&resourceVersion=1&resourceVersionMatch=NotOlderThan", 422, invalid, "resourceVersionMatch")
	get("watch: timeoutSeconds with a unit", mfCMs+"?watch=1&timeoutSeconds=10s", 400, bad, "timeoutSeconds", "10s")
	get("watch: garbage resourceVersion with sendInitialEvents", mfCMs+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=x1", 400, bad, "resourceVersion", "x1")
	get("watch: timeoutSeconds overflow", mfCMs+"?watch=1&timeoutSeconds=99999999999999999999", 400, bad, "timeoutSeconds")

	// Content types and Accept.
	post("content-type: text/plain", mfCMs, "text/plain", mfConfigMap("ct1"), 415, metav1.StatusReasonUnsupportedMediaType, "unknown format")
	post("content-type: xml", mfCMs, "application/xml", []byte(`<configmap/>`), 415, metav1.StatusReasonUnsupportedMediaType, "unknown format")
	post("content-type: malformed", mfCMs, "application/", mfConfigMap("ct3"), 415, metav1.StatusReasonUnsupportedMediaType, "")
	post("content-type: merge patch on create", mfCMs, mfMerge, mfConfigMap("ct4"), 415, metav1.StatusReasonUnsupportedMediaType, "unknown format")
	add(malformedCase{name: "accept: xml", method: http.MethodGet, path: mfCMs, accept: "application/xml", code: 406, reason: metav1.StatusReasonNotAcceptable, mention: []string{"Not Acceptable"}})
	add(malformedCase{name: "accept: table of unknown version", method: http.MethodGet, path: mfCMs, accept: "application/json;as=Table;v=v9;g=meta.k8s.io", code: 406, reason: metav1.StatusReasonNotAcceptable, mention: []string{"only the following media types are accepted"}})

	// Namespace and name in the body against the URL.
	post("namespace: body differs from URL", mfCMs, mfJSON, mfConfigMapMeta(`"name":"n1","namespace":"default"`), 400, bad, "namespace of the provided object does not match")
	put("namespace: body differs from URL on update", mfCM, mfConfigMapMeta(`"name":"existing","namespace":"default"`), 400, bad, "namespace")
	put("name: body differs from URL on update", mfCM, mfConfigMap("other"), 400, bad, "other", "existing")
	put("name: missing on update", mfCM, mfConfigMapMeta(`"labels":{"a":"b"}`), 400, bad, "name")
	post("namespace: does not exist", "/api/v1/namespaces/nope/configmaps", mfJSON, mfConfigMap("n2"), 404, metav1.StatusReasonNotFound, "nope")
	post("namespace: cluster-scoped kind under a namespace", "/api/v1/namespaces/"+mfNS+"/nodes", mfJSON, []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`), 404, metav1.StatusReasonNotFound, "")
	post("namespace: invalid name in URL", "/api/v1/namespaces/Bad_NS/configmaps", mfJSON, mfConfigMap("n3"), 422, invalid, "metadata.namespace", "Bad_NS")

	// Other request parameters.
	add(malformedCase{name: "delete: bad propagationPolicy", method: http.MethodDelete, path: mfCM + "?propagationPolicy=Sometimes", code: 422, reason: invalid, mention: []string{"propagationPolicy", "Sometimes"}})
	add(malformedCase{name: "delete: invalid body", method: http.MethodDelete, path: mfCM, contentType: mfJSON, body: []byte(`{"kind":`), code: 400, reason: bad})
	add(malformedCase{name: "delete: both orphan and propagation", method: http.MethodDelete, path: mfCM + "?orphanDependents=true&propagationPolicy=Background", code: 422, reason: invalid, mention: []string{"propagationPolicy"}})
	add(malformedCase{name: "delete: dryRun unknown", method: http.MethodDelete, path: mfCM + "?dryRun=Maybe", code: 422, reason: invalid, mention: []string{"dryRun", "Maybe"}})
	post("create: dryRun unknown", mfCMs+"?dryRun=Perhaps", mfJSON, mfConfigMap("dr"), 422, invalid, "dryRun", "Perhaps")
	post("create: on an item path", mfCM, mfJSON, mfConfigMap("existing"), 405, metav1.StatusReasonMethodNotAllowed, "does not allow this method")
	post("create: already exists", mfCMs, mfJSON, mfConfigMap("existing"), 409, metav1.StatusReasonAlreadyExists, "existing")
	put("update: collection", mfCMs, mfConfigMap("x"), 405, metav1.StatusReasonMethodNotAllowed, "does not allow this method")
	put("update: does not exist", mfCMs+"/ghost", mfConfigMap("ghost"), 404, metav1.StatusReasonNotFound, "ghost")
	get("get: unknown resource", "/api/v1/namespaces/"+mfNS+"/gadgets", 404, metav1.StatusReasonNotFound, "could not find the requested resource")
	get("get: unknown group", "/apis/example.com/v1/widgets", 404, metav1.StatusReasonNotFound, "could not find the requested resource")
	get("get: unknown path", "/no/such/path", 404, metav1.StatusReasonNotFound, "/no/such/path")
	get("get: missing object", mfCMs+"/ghost", 404, metav1.StatusReasonNotFound, "ghost")
	post("crd: bad group", mfCRDs, mfJSON, []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{"group":"Example","names":{"plural":"widgets","kind":"Widget"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`), 422, invalid, "spec.group")
	post("crd: name not plural.group", mfCRDs, mfJSON, []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gadgets.example.com"},"spec":{"group":"example.com","names":{"plural":"widgets","kind":"Widget"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`), 422, invalid, "metadata.name")
	// Custom resources (devices.example.com, server/customresources_test.go).
	dev := "/apis/example.com/v1/namespaces/" + mfNS + "/devices"
	devItem := dev + "/existing"
	device := func(spec string) []byte {
		return []byte(`{"apiVersion":"example.com/v1","kind":"Device","metadata":{"name":"d"},"spec":` + spec + `}`)
	}
	post("cr: invalid JSON", dev, mfJSON, []byte(`{"spec":`), 400, bad, "")
	post("cr: schema type", dev, mfJSON, device(`{"model":"m","replicas":"many"}`), 422, invalid, "spec.replicas")
	post("cr: schema required", dev, mfJSON, device(`{}`), 422, invalid, "spec.model")
	post("cr: schema enum", dev, mfJSON, device(`{"model":"m","mode":"turbo"}`), 422, invalid, "spec.mode", "turbo")
	post("cr: schema maxLength", dev, mfJSON, device(`{"model":"`+strings.Repeat("m", 33)+`"}`), 422, invalid, "spec.model")
	post("cr: CEL rule", dev, mfJSON, device(`{"model":"m","replicas":11}`), 422, invalid, "replicas must be at most 10")
	post("cr: unknown field, strict", dev+"?fieldValidation=Strict", mfJSON, device(`{"model":"m","colour":"red"}`), 400, bad, "spec.colour")
	post("cr: wrong kind", dev, mfJSON, []byte(`{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"d"},"spec":{"model":"m"}}`), 422, invalid, "kind", "must be Device")
	post("cr: wrong group", dev, mfJSON, []byte(`{"apiVersion":"other.com/v1","kind":"Device","metadata":{"name":"d"},"spec":{"model":"m"}}`), 400, bad, "other.com/v1")
	post("cr: bad name", dev, mfJSON, []byte(`{"apiVersion":"example.com/v1","kind":"Device","metadata":{"name":"D_1"},"spec":{"model":"m"}}`), 422, invalid, "metadata.name")
	post("cr: bad label", dev, mfJSON, []byte(`{"apiVersion":"example.com/v1","kind":"Device","metadata":{"name":"d","labels":{"a b":"c"}},"spec":{"model":"m"}}`), 422, invalid, "metadata.labels")
	put("cr: name differs from URL", devItem, []byte(`{"apiVersion":"example.com/v1","kind":"Device","metadata":{"name":"other"},"spec":{"model":"m"}}`), 400, bad, "other")
	get("cr: garbage resourceVersion on get", devItem+"?resourceVersion=xyz", 400, bad, "resourceVersion", "xyz")
	get("cr: garbage resourceVersion on watch", dev+"?watch=1&resourceVersion=xyz", 400, bad, "resourceVersion", "xyz")
	get("cr: bad label selector", dev+"?labelSelector=a+in+(", 400, bad, "labelSelector")
	get("cr: unsupported field selector", dev+"?fieldSelector=spec.model%3Dm", 400, bad, "spec.model")
	get("cr: garbage continue", dev+"?limit=1&continue=garbage", 400, bad, "continue")
	patch("cr: strategic merge patch", devItem, mfSMP, []byte(`{"spec":{"model":"n"}}`), 415, metav1.StatusReasonUnsupportedMediaType, "")
	patch("cr: json-patch unknown op", devItem, mfJSONPatch, []byte(`[{"op":"explode","path":"/spec"}]`), 422, invalid, mfJSONPatchRefused)
	patch("cr: merge patch breaking the schema", devItem, mfMerge, []byte(`{"spec":{"replicas":-1}}`), 422, invalid, "spec.replicas")
	patch("cr: apply with bad YAML", devItem+"?fieldManager=t", mfApply, []byte("apiVersion: example.com/v1\nkind: Device\nmetadata: name: existing\n"), 400, bad, "yaml")
	patch("cr: status with a bad type", devItem+"/status", mfMerge, []byte(`{"status":{"replicas":"x"}}`), 422, invalid, "status.replicas")
	return cases
}

// Malformed requests across the API surface each get the right 4xx and a
// Status that names the problem; none gets a 5xx; the server stays ready
// and the stored data does not change.
func TestMalformedRequests(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	createNamespace(t, ts, mfNS)
	if _, err := ts.client.CoreV1().RESTClient().Post().AbsPath(mfCMs).Body(mfConfigMap("existing", `"data":{"k":"v"}`)).SetHeader("Content-Type", mfJSON).DoRaw(ctx); err != nil {
		t.Fatal(err)
	}
	createCRD(t, ts, devicesCRD(t))
	if _, err := ts.dynamic.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "devices"}).Namespace(mfNS).
		Create(ctx, device("existing", map[string]any{"model": "m"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := mfSnapshot(t, ts)

	httpClient, err := rest.HTTPClientFor(ts.rest)
	if err != nil {
		t.Fatal(err)
	}
	cases := malformedCases()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, status, raw := mfDo(t, httpClient, ts.rest.Host, c)
			if code >= 500 {
				t.Fatalf("%s %s: %d (5xx): %s", c.method, c.path, code, raw)
			}
			if code != c.code {
				t.Errorf("%s %s: code %d, want %d: %s", c.method, c.path, code, c.code, raw)
			}
			if status == nil {
				t.Fatalf("body is not a Status: %s", raw)
			}
			if status.Status != metav1.StatusFailure || status.Code != int32(code) {
				t.Errorf("status %q code %d, want Failure %d", status.Status, status.Code, code)
			}
			if status.Reason == "" {
				t.Errorf("Status has no reason: %s", raw)
			} else if c.reason != "" && status.Reason != c.reason {
				t.Errorf("reason %q, want %q: %s", status.Reason, c.reason, status.Message)
			}
			if status.Message == "" {
				t.Errorf("Status has no message")
			}
			// The message, or its causes (a json-patch error is a generic
			// message with the patch library's error as the cause).
			text := status.Message
			if status.Details != nil {
				for _, cause := range status.Details.Causes {
					text += "\n" + cause.Field + ": " + cause.Message
				}
			}
			for _, m := range c.mention {
				if !strings.Contains(text, m) {
					t.Errorf("Status does not mention %q: %s", m, text)
				}
			}
		})
	}

	var status int
	ts.client.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
	if status != http.StatusOK {
		t.Errorf("/readyz after the suite: %d", status)
	}
	after := mfSnapshot(t, ts)
	if d := mfSnapshotDiff(before, after); d != "" {
		t.Errorf("stored data changed: %s", d)
	}
	t.Logf("bad-input suite: %d malformed requests", len(cases))
	fmt.Printf("bad-input suite: %d malformed requests\n", len(cases))
	if len(cases) < 100 {
		t.Errorf("only %d cases, want at least 100", len(cases))
	}
}

func mfDo(t *testing.T, c *http.Client, host string, bc malformedCase) (int, *metav1.Status, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var body io.Reader
	if bc.body != nil {
		body = bytes.NewReader(bc.body)
	}
	req, err := http.NewRequestWithContext(ctx, bc.method, host+bc.path, body)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case bc.contentType == "-":
	case bc.contentType != "":
		req.Header.Set("Content-Type", bc.contentType)
	case bc.body != nil:
		req.Header.Set("Content-Type", mfJSON)
	}
	if bc.accept != "" {
		req.Header.Set("Accept", bc.accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (the server hung or dropped the connection)", bc.method, bc.path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("%s %s: reading the response: %v", bc.method, bc.path, err)
	}
	var s metav1.Status
	if err := json.Unmarshal(raw, &s); err != nil || s.Kind != "Status" {
		return resp.StatusCode, nil, string(raw)
	}
	return resp.StatusCode, &s, string(raw)
}

var mfResources = []schema.GroupVersionResource{
	{Version: "v1", Resource: "namespaces"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "secrets"},
	{Version: "v1", Resource: "pods"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "events"},
	{Version: "v1", Resource: "nodes"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	{Group: "example.com", Version: "v1", Resource: "devices"},
}

// snapshot lists every resource the suite writes to: resource/ns/name@rv.
func mfSnapshot(t *testing.T, ts *testServer) []string {
	t.Helper()
	var out []string
	for _, gvr := range mfResources {
		l, err := ts.dynamic.Resource(gvr).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing %s: %v", gvr.Resource, err)
		}
		for _, o := range l.Items {
			out = append(out, fmt.Sprintf("%s/%s/%s@%s", gvr.Resource, o.GetNamespace(), o.GetName(), o.GetResourceVersion()))
		}
	}
	slices.Sort(out)
	return out
}

func mfSnapshotDiff(before, after []string) string {
	var d []string
	for _, s := range before {
		if !slices.Contains(after, s) {
			d = append(d, "-"+s)
		}
	}
	for _, s := range after {
		if !slices.Contains(before, s) {
			d = append(d, "+"+s)
		}
	}
	return strings.Join(d, " ")
}
