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
type badCase struct {
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
	badNS    = "badinput"
	cmPath   = "/api/v1/namespaces/" + badNS + "/configmaps"
	cmItem   = cmPath + "/existing"
	podPath  = "/api/v1/namespaces/" + badNS + "/pods"
	secPath  = "/api/v1/namespaces/" + badNS + "/secrets"
	svcPath  = "/api/v1/namespaces/" + badNS + "/services"
	evPath   = "/api/v1/namespaces/" + badNS + "/events"
	lsPath   = "/apis/coordination.k8s.io/v1/namespaces/" + badNS + "/leases"
	epsPath  = "/apis/discovery.k8s.io/v1/namespaces/" + badNS + "/endpointslices"
	saPath   = "/api/v1/namespaces/" + badNS + "/serviceaccounts"
	nsPath   = "/api/v1/namespaces"
	nodePath = "/api/v1/nodes"
	crdPath  = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

	jsonCT  = "application/json"
	yamlCT  = "application/yaml"
	protoCT = "application/vnd.kubernetes.protobuf"
	mergeCT = "application/merge-patch+json"
	jpCT    = "application/json-patch+json"
	smpCT   = "application/strategic-merge-patch+json"
	applyCT = "application/apply-patch+yaml"
)

// cm is a ConfigMap body named name with extra top-level JSON members.
func cm(name string, extra ...string) []byte {
	s := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"}`
	for _, e := range extra {
		s += "," + e
	}
	return []byte(s + "}")
}

// cmMeta is a ConfigMap body with the given metadata members.
func cmMeta(meta string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{` + meta + `}}`)
}

// jsonPatchRefused is upstream's whole message for a JSON patch that cannot
// be applied: the patch library's error is dropped (apierrors.
// NewGenericServerResponse keeps no cause for a 422).
const jsonPatchRefused = "the server rejected our request due to an error in our request"

func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func badCases() []badCase {
	big := bytes.Repeat([]byte("x"), 4<<20)
	bigCM := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"` + string(big) + `"}}`)
	overMiB := strings.Repeat("y", 1<<20+1)
	longName := strings.Repeat("a", 254)
	longLabel := strings.Repeat("v", 64)
	bigAnnotation := strings.Repeat("z", 256<<10+1)
	garbageContinue := base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v9","rv":1,"start":"x"}`))

	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	post := func(name, path, ct string, body []byte, code int, reason metav1.StatusReason, mention ...string) {
		add(badCase{name: name, method: http.MethodPost, path: path, contentType: ct, body: body, code: code, reason: reason, mention: mention})
	}
	get := func(name, path string, code int, reason metav1.StatusReason, mention ...string) {
		add(badCase{name: name, method: http.MethodGet, path: path, code: code, reason: reason, mention: mention})
	}
	patch := func(name, path, ct string, body []byte, code int, reason metav1.StatusReason, mention ...string) {
		add(badCase{name: name, method: http.MethodPatch, path: path, contentType: ct, body: body, code: code, reason: reason, mention: mention})
	}
	put := func(name, path string, body []byte, code int, reason metav1.StatusReason, mention ...string) {
		add(badCase{name: name, method: http.MethodPut, path: path, contentType: jsonCT, body: body, code: code, reason: reason, mention: mention})
	}
	bad, invalid := metav1.StatusReasonBadRequest, metav1.StatusReasonInvalid

	// Invalid JSON bodies.
	post("json: empty body", cmPath, jsonCT, nil, 400, bad, "json parse error")
	post("json: unterminated object", cmPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"ConfigMap"`), 400, bad, "unexpected end of JSON input")
	post("json: missing value", cmPath, jsonCT, []byte(`{"apiVersion":}`), 400, bad, "invalid character")
	post("json: array", cmPath, jsonCT, []byte(`[]`), 400, bad, "cannot unmarshal array")
	post("json: string", cmPath, jsonCT, []byte(`"configmap"`), 400, bad, "cannot unmarshal string")
	post("json: number", cmPath, jsonCT, []byte(`42`), 400, bad, "cannot unmarshal number")
	post("json: null", cmPath, jsonCT, []byte(`null`), 422, invalid, "metadata.name", "name or generateName is required")
	post("json: single quotes", cmPath, jsonCT, []byte(`{'apiVersion':'v1'}`), 400, bad, "invalid character")
	post("json: trailing comma", cmPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"ConfigMap",}`), 400, bad, "invalid character")
	post("json: garbage after object", cmPath, jsonCT, append(cm("trailing"), []byte(`garbage`)...), 400, bad, "invalid character")
	post("json: invalid UTF-8", cmPath, jsonCT, []byte("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"\xff\xfe\"}}"), 422, invalid, "metadata.name")
	post("json: data value is a number", cmPath, jsonCT, cm("num", `"data":{"a":1}`), 400, bad, "ConfigMap.data")
	post("json: data is a list", cmPath, jsonCT, cm("list", `"data":["a"]`), 400, bad, "ConfigMap.data")
	post("json: metadata is a string", cmPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":"x"}`), 400, bad, "ObjectMeta")
	post("json: labels is a list", cmPath, jsonCT, cmMeta(`"name":"l","labels":["a"]`), 400, bad, "labels")
	post("json: binaryData not base64", cmPath, jsonCT, cm("b64", `"binaryData":{"a":"!!!"}`), 400, bad, "illegal base64")
	post("json: secret data not base64", secPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"not base64!"}}`), 400, bad, "illegal base64")
	post("json: pod containers is an object", podPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":{}}}`), 400, bad, "containers")
	post("json: lease duration is a string", lsPath, jsonCT, []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"leaseDurationSeconds":"ten"}}`), 400, bad, "leaseDurationSeconds")
	post("json: deeply nested unknown field", cmPath, jsonCT, cm("deep", `"x":`+nested(100000)), 400, bad, "max depth")
	post("json: deeply nested unknown field, strict", cmPath+"?fieldValidation=Strict", jsonCT, cm("deep", `"x":`+nested(100000)), 400, bad, "max depth")
	post("json: deeply nested data value", cmPath, jsonCT, cm("deep", `"data":{"a":`+nested(100000)+`}`), 400, bad, "max depth")

	// Invalid YAML bodies.
	post("yaml: mapping in a scalar", cmPath, yamlCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: name: x\n"), 400, bad, "yaml")
	post("yaml: unclosed flow sequence", cmPath, yamlCT, []byte("apiVersion: v1\nkind: [ConfigMap\n"), 400, bad, "yaml")
	post("yaml: tab indentation", cmPath, yamlCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n"), 400, bad, "yaml")
	post("yaml: a list", cmPath, yamlCT, []byte("- a\n- b\n"), 400, bad, "cannot unmarshal array")
	post("yaml: a scalar", cmPath, yamlCT, []byte("just a string\n"), 400, bad, "cannot unmarshal string")
	post("yaml: duplicate key, strict", cmPath+"?fieldValidation=Strict", yamlCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n"), 400, bad, `"name"`, "already set")
	post("yaml: unknown field, strict", cmPath+"?fieldValidation=Strict", yamlCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nspec: {}\n"), 400, bad, `unknown field "spec"`)
	post("yaml: anchors bomb", cmPath, yamlCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\na: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"), 400, bad, "yaml")

	// Invalid protobuf bodies.
	post("protobuf: no magic", cmPath, protoCT, []byte("hello, world"), 400, bad, "protobuf")
	post("protobuf: magic only", cmPath, protoCT, []byte("k8s\x00"), 400, bad, "")
	post("protobuf: magic and garbage", cmPath, protoCT, append([]byte("k8s\x00"), 0xff, 0xff, 0xff, 0xff, 0x0f), 400, bad, "")
	post("protobuf: truncated Unknown", cmPath, protoCT, append([]byte("k8s\x00"), 0x0a, 0x40, 0x0a), 400, bad, "")
	post("protobuf: JSON in protobuf clothing", cmPath, protoCT, cm("p"), 400, bad, "protobuf")

	// Wrong kind or apiVersion in the body.
	post("kind: Secret to configmaps", cmPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"k"}}`), 400, bad, "Secret", "ConfigMap")
	post("kind: unknown kind", cmPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Gadget","metadata":{"name":"k"}}`), 400, bad, "Gadget")
	post("kind: unknown version", cmPath, jsonCT, []byte(`{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"k"}}`), 400, bad, "v2")
	post("kind: other group", cmPath, jsonCT, []byte(`{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"k"}}`), 400, bad, "apps/v1")
	post("kind: lease as core/v1", lsPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Lease","metadata":{"name":"k"}}`), 400, bad, "Lease")
	post("kind: pod to configmaps", cmPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"k"}}`), 400, bad, "Pod", "ConfigMap")
	post("kind: List to configmaps", cmPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"List","items":[]}`), 400, bad, "List")
	post("kind: Status to configmaps", cmPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Status"}`), 400, bad, "Status")
	post("kind: apiVersion not a string", cmPath, jsonCT, []byte(`{"apiVersion":1,"kind":"ConfigMap","metadata":{"name":"k"}}`), 400, bad, "apiVersion")

	// Names, labels, annotations and data keys that break the rules.
	post("name: upper case", cmPath, jsonCT, cm("UPPER"), 422, invalid, "metadata.name", "UPPER")
	post("name: underscore", cmPath, jsonCT, cm("a_b"), 422, invalid, "metadata.name", "a_b")
	post("name: leading dash", cmPath, jsonCT, cm("-lead"), 422, invalid, "metadata.name")
	post("name: trailing dot", cmPath, jsonCT, cm("trail."), 422, invalid, "metadata.name")
	post("name: too long", cmPath, jsonCT, cm(longName), 422, invalid, "metadata.name", "253")
	post("name: missing", cmPath, jsonCT, cmMeta(`"labels":{"a":"b"}`), 422, invalid, "metadata.name", "name or generateName is required")
	post("name: dot", cmPath, jsonCT, cm("."), 422, invalid, "metadata.name")
	post("name: dotdot", cmPath, jsonCT, cm(".."), 422, invalid, "metadata.name")
	post("name: percent", cmPath, jsonCT, cm("a%b"), 422, invalid, "metadata.name")
	post("name: slash", cmPath, jsonCT, cm("a/b"), 422, invalid, "metadata.name")
	post("name: generateName invalid", cmPath, jsonCT, cmMeta(`"generateName":"Bad_"`), 422, invalid, "metadata.generateName")
	post("name: pod name not a DNS subdomain", podPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"P!"},"spec":{"containers":[{"name":"c","image":"i"}]}}`), 422, invalid, "metadata.name")
	post("name: namespace with dot", nsPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a.b"}}`), 422, invalid, "metadata.name", "a.b")
	post("name: service name starts with digit", svcPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"1svc"},"spec":{"ports":[{"port":80}]}}`), 422, invalid, "metadata.name")
	post("label: key with space", cmPath, jsonCT, cmMeta(`"name":"l1","labels":{"a b":"c"}`), 422, invalid, "metadata.labels", "a b")
	post("label: value too long", cmPath, jsonCT, cmMeta(`"name":"l2","labels":{"a":"`+longLabel+`"}`), 422, invalid, "metadata.labels", "63")
	post("label: value with slash", cmPath, jsonCT, cmMeta(`"name":"l3","labels":{"a":"b/c"}`), 422, invalid, "metadata.labels", "b/c")
	post("label: prefix upper case", cmPath, jsonCT, cmMeta(`"name":"l4","labels":{"Example.COM/a":"b"}`), 422, invalid, "metadata.labels", "Example.COM")
	post("label: empty key", cmPath, jsonCT, cmMeta(`"name":"l5","labels":{"":"b"}`), 422, invalid, "metadata.labels")
	post("label: two slashes", cmPath, jsonCT, cmMeta(`"name":"l6","labels":{"a/b/c":"d"}`), 422, invalid, "metadata.labels", "a/b/c")
	post("annotation: key with space", cmPath, jsonCT, cmMeta(`"name":"a1","annotations":{"a b":"c"}`), 422, invalid, "metadata.annotations", "a b")
	post("annotation: over 256KiB", cmPath, jsonCT, cmMeta(`"name":"a2","annotations":{"a":"`+bigAnnotation+`"}`), 422, invalid, "metadata.annotations", "Too long", "262144")
	post("finalizer: not qualified", cmPath, jsonCT, cmMeta(`"name":"f1","finalizers":["Not Valid"]`), 422, invalid, "metadata.finalizers")
	post("data: key with space", cmPath, jsonCT, cm("d1", `"data":{"a b":"c"}`), 422, invalid, "data[a b]")
	post("data: key in data and binaryData", cmPath, jsonCT, cm("d2", `"data":{"k":"v"},"binaryData":{"k":"dg=="}`), 422, invalid, "binaryData[k]", "duplicate")
	post("data: over 1MiB", cmPath, jsonCT, cm("d3", `"data":{"a":"`+overMiB+`"}`), 422, invalid, "Too long", "1048576")
	post("secret: key with slash", secPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1"},"stringData":{"a/b":"c"}}`), 422, invalid, "data[a/b]")
	post("secret: tls type without keys", secPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s2"},"type":"kubernetes.io/tls"}`), 422, invalid, "data[tls.crt]")
	post("pod: no containers", podPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},"spec":{"containers":[]}}`), 422, invalid, "spec.containers")
	post("pod: container without image", podPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p2"},"spec":{"containers":[{"name":"c"}]}}`), 422, invalid, "spec.containers[0].image")
	post("pod: bad restartPolicy", podPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p3"},"spec":{"restartPolicy":"Sometimes","containers":[{"name":"c","image":"i"}]}}`), 422, invalid, "spec.restartPolicy", "Sometimes")
	post("service: port out of range", svcPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":70000}]}}`), 422, invalid, "spec.ports[0].port")
	post("service: bad type", svcPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"type":"Magic","ports":[{"port":80}]}}`), 422, invalid, "spec.type", "Magic")
	post("lease: negative duration", lsPath, jsonCT, []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"leaseDurationSeconds":-5}}`), 422, invalid, "spec.leaseDurationSeconds")
	post("endpointslice: bad address type", epsPath, jsonCT, []byte(`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"e"},"addressType":"IPv5","endpoints":[]}`), 422, invalid, "addressType", "IPv5")
	post("event: no involved object", evPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"}}`), 422, invalid, "involvedObject")
	post("node: bad taint effect", nodePath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"spec":{"taints":[{"key":"k","effect":"Maybe"}]}}`), 422, invalid, "spec.taints[0].effect", "Maybe")
	post("serviceaccount: bad name", saPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"SA"}}`), 422, invalid, "metadata.name")

	// Unknown and duplicate fields with fieldValidation=Strict, and bad
	// fieldValidation values.
	strict := cmPath + "?fieldValidation=Strict"
	post("strict: unknown top-level field", strict, jsonCT, cm("u1", `"spec":{}`), 400, bad, `unknown field "spec"`)
	post("strict: unknown metadata field", strict, jsonCT, cmMeta(`"name":"u2","nmae":"x"`), 400, bad, `unknown field "metadata.nmae"`)
	post("strict: duplicate field", strict, jsonCT, cmMeta(`"name":"u3","name":"u4"`), 400, bad, `duplicate field "metadata.name"`)
	post("strict: duplicate data key", strict, jsonCT, cm("u5", `"data":{"a":"1","a":"2"}`), 400, bad, `duplicate field "data.a"`)
	post("strict: unknown pod spec field", podPath+"?fieldValidation=Strict", jsonCT, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containerz":[]}}`), 400, bad, `unknown field "spec.containerz"`)
	post("strict: case-mismatched field", strict, jsonCT, cm("u6", `"Data":{"a":"b"}`), 400, bad, `unknown field "Data"`)
	post("fieldValidation: unknown value", cmPath+"?fieldValidation=Loose", jsonCT, cm("u7"), 422, invalid, "fieldValidation", "Loose")
	put("strict: unknown field on update", cmItem+"?fieldValidation=Strict", cm("existing", `"spec":{}`), 400, bad, `unknown field "spec"`)
	patch("strict: unknown field in merge patch", cmItem+"?fieldValidation=Strict", mergeCT, []byte(`{"spec":{"a":1}}`), 422, invalid, `unknown field "spec"`)
	patch("strict: unknown field in apply", cmItem+"?fieldManager=t&fieldValidation=Strict", applyCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\nspec: {}\n"), 400, bad, "spec")

	// Bodies over the size limit.
	post("size: 4MiB create", cmPath, jsonCT, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")
	put("size: 4MiB update", cmItem, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")
	patch("size: 4MiB merge patch", cmItem, mergeCT, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")
	patch("size: 4MiB apply", cmItem+"?fieldManager=t", applyCT, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")
	post("size: 4MiB yaml", cmPath, yamlCT, bigCM, 413, metav1.StatusReasonRequestEntityTooLarge, "limit")

	// resourceVersion and continue tokens that are garbage or from the future.
	get("rv: garbage on list", cmPath+"?resourceVersion=abc", 400, bad, "resourceVersion", "abc")
	get("rv: negative on list", cmPath+"?resourceVersion=-1", 400, bad, "resourceVersion", "-1")
	get("rv: garbage on get", cmItem+"?resourceVersion=xyz", 400, bad, "resourceVersion", "xyz")
	get("rv: garbage on watch", cmPath+"?watch=1&resourceVersion=zzz", 400, bad, "resourceVersion", "zzz")
	get("rv: exact without value", cmPath+"?resourceVersionMatch=Exact", 422, invalid, "resourceVersionMatch")
	get("rv: unknown match", cmPath+"?resourceVersion=1&resourceVersionMatch=Sometimes", 422, invalid, "resourceVersionMatch", "Sometimes")
	get("rv: match with watch", cmPath+"?watch=1&resourceVersion=1&resourceVersionMatch=Exact", 422, invalid, "resourceVersionMatch")
	put("rv: garbage on update", cmItem, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","resourceVersion":"abc"}}`), 400, bad, "metadata.resourceVersion", "abc")
	post("rv: set on create", cmPath, jsonCT, cmMeta(`"name":"rvc","resourceVersion":"5"`), 400, bad, "metadata.resourceVersion", "must not be set on create")
	post("rv: garbage on create", cmPath, jsonCT, cmMeta(`"name":"rvd","resourceVersion":"abc"`), 400, bad, "metadata.resourceVersion", "abc")
	post("rv: set on namespace create", nsPath, jsonCT, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"rvns","resourceVersion":"5"}}`), 400, bad, "metadata.resourceVersion")
	put("rv: garbage on status update", "/api/v1/namespaces/"+badNS+"/pods/ghost/status", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"ghost","resourceVersion":"x"}}`), 404, metav1.StatusReasonNotFound, "ghost")
	put("rv: garbage on namespace update", nsPath+"/"+badNS, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+badNS+`","resourceVersion":"x"}}`), 400, bad, "metadata.resourceVersion")
	put("rv: stale on update", cmItem, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","resourceVersion":"1"}}`), 409, metav1.StatusReasonConflict, "existing", "modified")
	put("rv: future on update", cmItem, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","resourceVersion":"999999999"}}`), 409, metav1.StatusReasonConflict, "existing")
	add(badCase{name: "rv: delete precondition mismatch", method: http.MethodDelete, path: cmItem, contentType: jsonCT,
		body: []byte(`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}`), code: 409, reason: metav1.StatusReasonConflict, mention: []string{"ResourceVersion in the precondition (1)"}})
	add(badCase{name: "uid: delete precondition mismatch", method: http.MethodDelete, path: cmItem, contentType: jsonCT,
		body: []byte(`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`), code: 409, reason: metav1.StatusReasonConflict, mention: []string{"UID in the precondition"}})
	get("continue: garbage", cmPath+"?limit=1&continue=garbage", 400, bad, "continue")
	get("continue: not JSON", cmPath+"?limit=1&continue="+base64.RawURLEncoding.EncodeToString([]byte("not json")), 400, bad, "continue")
	get("continue: unknown version", cmPath+"?limit=1&continue="+garbageContinue, 400, bad, "continue")
	get("continue: key escapes the prefix", cmPath+"?limit=1&continue="+base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":1,"start":"../../secrets/"}`)), 400, bad, "continue")
	get("continue: with resourceVersion", cmPath+"?limit=1&resourceVersion=1&continue="+base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":1,"start":"a"}`)), 400, bad, "resource version", "continue")
	get("continue: with watch", cmPath+"?watch=1&continue=abc", 422, invalid, "continue")
	get("limit: not a number", cmPath+"?limit=ten", 400, bad, "limit")
	get("limit: overflow", cmPath+"?limit=99999999999999999999", 400, bad, "limit")

	// Bad label and field selectors.
	get("labelSelector: unbalanced paren", cmPath+"?labelSelector=a+in+(b", 400, bad, "labelSelector", "a in (b")
	get("labelSelector: bare operator", cmPath+"?labelSelector==b", 400, bad, "labelSelector")
	get("labelSelector: double bang", cmPath+"?labelSelector=!!a", 400, bad, "labelSelector")
	get("labelSelector: bad key", cmPath+"?labelSelector=a%20b%3Dc", 400, bad, "labelSelector")
	get("labelSelector: bad value", cmPath+"?labelSelector=a%3Db%2Fc", 400, bad, "labelSelector")
	get("labelSelector: gt with text", cmPath+"?labelSelector=a%3Ex", 400, bad, "labelSelector")
	get("labelSelector: on watch", cmPath+"?watch=1&labelSelector=a+in+(", 400, bad, "labelSelector")
	get("fieldSelector: unsupported field", cmPath+"?fieldSelector=data.a%3Db", 400, bad, "data.a", "not supported")
	get("fieldSelector: pod field on configmaps", cmPath+"?fieldSelector=spec.nodeName%3Dn", 400, bad, "spec.nodeName")
	get("fieldSelector: unsupported pod field", podPath+"?fieldSelector=spec.bogus%3Dn", 400, bad, "spec.bogus")
	get("fieldSelector: no operator", cmPath+"?fieldSelector=metadata.name", 400, bad, "fieldSelector")
	get("fieldSelector: set operator", cmPath+"?fieldSelector=metadata.name+in+(a)", 400, bad, "fieldSelector")
	get("fieldSelector: on watch", cmPath+"?watch=1&fieldSelector=bogus%3D1", 400, bad, "bogus")
	get("fieldSelector: on nodes", nodePath+"?fieldSelector=spec.nodeName%3Dx", 400, bad, "spec.nodeName")
	get("fieldSelector: on events", evPath+"?fieldSelector=involvedObject.bogus%3Dx", 400, bad, "involvedObject.bogus")

	// Bad patch documents.
	patch("json-patch: not an array", cmItem, jpCT, []byte(`{"op":"add"}`), 400, bad, "cannot unmarshal object")
	patch("json-patch: unknown op", cmItem, jpCT, []byte(`[{"op":"frobnicate","path":"/data/a","value":"b"}]`), 422, invalid, jsonPatchRefused)
	patch("json-patch: missing path", cmItem, jpCT, []byte(`[{"op":"add","value":"b"}]`), 422, invalid, jsonPatchRefused)
	patch("json-patch: path to nowhere", cmItem, jpCT, []byte(`[{"op":"replace","path":"/nowhere/deep","value":"b"}]`), 422, invalid, jsonPatchRefused)
	patch("json-patch: remove missing", cmItem, jpCT, []byte(`[{"op":"remove","path":"/data/missing"}]`), 422, invalid, jsonPatchRefused)
	patch("json-patch: failed test", cmItem, jpCT, []byte(`[{"op":"test","path":"/data/k","value":"other"}]`), 422, invalid, jsonPatchRefused)
	patch("json-patch: invalid JSON", cmItem, jpCT, []byte(`[{"op":`), 400, bad, "")
	patch("json-patch: value of wrong type", cmItem, jpCT, []byte(`[{"op":"add","path":"/data/n","value":1}]`), 422, invalid, "ConfigMap.data")
	patch("json-patch: change kind", cmItem, jpCT, []byte(`[{"op":"replace","path":"/apiVersion","value":"v9"}]`), 422, invalid, "v9")
	patch("merge: invalid JSON", cmItem, mergeCT, []byte(`{"data":`), 400, bad, "")
	patch("merge: not an object", cmItem, mergeCT, []byte(`["a"]`), 400, bad, "")
	patch("merge: rename", cmItem, mergeCT, []byte(`{"metadata":{"name":"other"}}`), 400, bad, "name", "other")
	patch("merge: move namespace", cmItem, mergeCT, []byte(`{"metadata":{"namespace":"default"}}`), 400, bad, "namespace")
	patch("merge: bad label", cmItem, mergeCT, []byte(`{"metadata":{"labels":{"a b":"c"}}}`), 422, invalid, "metadata.labels")
	patch("merge: data number", cmItem, mergeCT, []byte(`{"data":{"a":1}}`), 422, invalid, "ConfigMap.data")
	patch("strategic: invalid JSON", cmItem, smpCT, []byte(`{{`), 400, bad, "")
	patch("strategic: unknown directive", cmItem, smpCT, []byte(`{"data":{"$patch":"explode"}}`), 400, bad, "explode")
	patch("strategic: retainKeys not a list", cmItem, smpCT, []byte(`{"$retainKeys":"x"}`), 400, bad, "retainKeys")
	patch("strategic: a list", cmItem, smpCT, []byte(`[1,2]`), 400, bad, "")
	patch("apply: invalid YAML", cmItem+"?fieldManager=t", applyCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: name: existing\n"), 400, bad, "yaml")
	patch("apply: no fieldManager", cmItem, applyCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\n"), 422, invalid, "fieldManager")
	patch("apply: no kind", cmItem+"?fieldManager=t", applyCT, []byte("apiVersion: v1\nmetadata:\n  name: existing\n"), 400, bad, "invalid object type")
	patch("apply: wrong kind", cmItem+"?fieldManager=t", applyCT, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: existing\n"), 400, bad, "Secret")
	patch("apply: name mismatch", cmItem+"?fieldManager=t", applyCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"), 400, bad, "other")
	patch("apply: fieldManager too long", cmItem+"?fieldManager="+strings.Repeat("m", 129), applyCT, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\n"), 422, invalid, "fieldManager")
	patch("apply: force on merge patch", cmItem+"?force=true", mergeCT, []byte(`{"data":{"a":"b"}}`), 422, invalid, "force")
	patch("patch: unsupported patch type", cmItem, "application/x-patch", []byte(`{}`), 415, metav1.StatusReasonUnsupportedMediaType, "Unsupported Media Type")
	patch("patch: no content type", cmItem, "-", []byte(`{}`), 415, metav1.StatusReasonUnsupportedMediaType, "")

	// Watch parameters out of range.
	get("watch: negative timeoutSeconds", cmPath+"?watch=1&timeoutSeconds=-1", 400, bad, "timeoutSeconds", "-1")
	get("watch: timeoutSeconds not a number", cmPath+"?watch=1&timeoutSeconds=soon", 400, bad, "timeoutSeconds")
	get("watch: sendInitialEvents without match", cmPath+"?watch=1&sendInitialEvents=true", 422, invalid, "resourceVersionMatch")
	get("watch: sendInitialEvents on list", cmPath+"?sendInitialEvents=true&resourceVersionMatch=NotOlderThan", 422, invalid, "sendInitialEvents")
	get("watch: sendInitialEvents not a bool", cmPath+"?watch=1&sendInitialEvents=often", 422, invalid, "resourceVersionMatch", "sendInitialEvents")
	get("watch: resourceVersionMatch without sendInitialEvents", cmPath+"?watch=1&resourceVersion=1&resourceVersionMatch=NotOlderThan", 422, invalid, "resourceVersionMatch")
	get("watch: timeoutSeconds with a unit", cmPath+"?watch=1&timeoutSeconds=10s", 400, bad, "timeoutSeconds", "10s")
	get("watch: garbage resourceVersion with sendInitialEvents", cmPath+"?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=x1", 400, bad, "resourceVersion", "x1")
	get("watch: timeoutSeconds overflow", cmPath+"?watch=1&timeoutSeconds=99999999999999999999", 400, bad, "timeoutSeconds")

	// Content types and Accept.
	post("content-type: text/plain", cmPath, "text/plain", cm("ct1"), 415, metav1.StatusReasonUnsupportedMediaType, "unknown format")
	post("content-type: xml", cmPath, "application/xml", []byte(`<configmap/>`), 415, metav1.StatusReasonUnsupportedMediaType, "unknown format")
	post("content-type: malformed", cmPath, "application/", cm("ct3"), 415, metav1.StatusReasonUnsupportedMediaType, "")
	post("content-type: merge patch on create", cmPath, mergeCT, cm("ct4"), 415, metav1.StatusReasonUnsupportedMediaType, "unknown format")
	add(badCase{name: "accept: xml", method: http.MethodGet, path: cmPath, accept: "application/xml", code: 406, reason: metav1.StatusReasonNotAcceptable, mention: []string{"Not Acceptable"}})
	add(badCase{name: "accept: table of unknown version", method: http.MethodGet, path: cmPath, accept: "application/json;as=Table;v=v9;g=meta.k8s.io", code: 406, reason: metav1.StatusReasonNotAcceptable, mention: []string{"only the following media types are accepted"}})

	// Namespace and name in the body against the URL.
	post("namespace: body differs from URL", cmPath, jsonCT, cmMeta(`"name":"n1","namespace":"default"`), 400, bad, "namespace of the provided object does not match")
	put("namespace: body differs from URL on update", cmItem, cmMeta(`"name":"existing","namespace":"default"`), 400, bad, "namespace")
	put("name: body differs from URL on update", cmItem, cm("other"), 400, bad, "other", "existing")
	put("name: missing on update", cmItem, cmMeta(`"labels":{"a":"b"}`), 400, bad, "name")
	post("namespace: does not exist", "/api/v1/namespaces/nope/configmaps", jsonCT, cm("n2"), 404, metav1.StatusReasonNotFound, "nope")
	post("namespace: cluster-scoped kind under a namespace", "/api/v1/namespaces/"+badNS+"/nodes", jsonCT, []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`), 404, metav1.StatusReasonNotFound, "")
	post("namespace: invalid name in URL", "/api/v1/namespaces/Bad_NS/configmaps", jsonCT, cm("n3"), 422, invalid, "metadata.namespace", "Bad_NS")

	// Other request parameters.
	add(badCase{name: "delete: bad propagationPolicy", method: http.MethodDelete, path: cmItem + "?propagationPolicy=Sometimes", code: 422, reason: invalid, mention: []string{"propagationPolicy", "Sometimes"}})
	add(badCase{name: "delete: invalid body", method: http.MethodDelete, path: cmItem, contentType: jsonCT, body: []byte(`{"kind":`), code: 400, reason: bad})
	add(badCase{name: "delete: both orphan and propagation", method: http.MethodDelete, path: cmItem + "?orphanDependents=true&propagationPolicy=Background", code: 422, reason: invalid, mention: []string{"propagationPolicy"}})
	add(badCase{name: "delete: dryRun unknown", method: http.MethodDelete, path: cmItem + "?dryRun=Maybe", code: 422, reason: invalid, mention: []string{"dryRun", "Maybe"}})
	post("create: dryRun unknown", cmPath+"?dryRun=Perhaps", jsonCT, cm("dr"), 422, invalid, "dryRun", "Perhaps")
	post("create: on an item path", cmItem, jsonCT, cm("existing"), 405, metav1.StatusReasonMethodNotAllowed, "does not allow this method")
	post("create: already exists", cmPath, jsonCT, cm("existing"), 409, metav1.StatusReasonAlreadyExists, "existing")
	put("update: collection", cmPath, cm("x"), 405, metav1.StatusReasonMethodNotAllowed, "does not allow this method")
	put("update: does not exist", cmPath+"/ghost", cm("ghost"), 404, metav1.StatusReasonNotFound, "ghost")
	get("get: unknown resource", "/api/v1/namespaces/"+badNS+"/gadgets", 404, metav1.StatusReasonNotFound, "could not find the requested resource")
	get("get: unknown group", "/apis/example.com/v1/widgets", 404, metav1.StatusReasonNotFound, "could not find the requested resource")
	get("get: unknown path", "/no/such/path", 404, metav1.StatusReasonNotFound, "/no/such/path")
	get("get: missing object", cmPath+"/ghost", 404, metav1.StatusReasonNotFound, "ghost")
	post("crd: bad group", crdPath, jsonCT, []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{"group":"Example","names":{"plural":"widgets","kind":"Widget"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`), 422, invalid, "spec.group")
	post("crd: name not plural.group", crdPath, jsonCT, []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gadgets.example.com"},"spec":{"group":"example.com","names":{"plural":"widgets","kind":"Widget"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`), 422, invalid, "metadata.name")
	return cases
}

// Malformed requests across the API surface each get the right 4xx and a
// Status that names the problem; none gets a 5xx; the server stays ready
// and the stored data does not change.
func TestBadInput(t *testing.T) {
	ts := startServer(t, testConfig(t))
	ctx := t.Context()
	createNamespace(t, ts, badNS)
	if _, err := ts.client.CoreV1().RESTClient().Post().AbsPath(cmPath).Body(cm("existing", `"data":{"k":"v"}`)).SetHeader("Content-Type", jsonCT).DoRaw(ctx); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ts)

	httpClient, err := rest.HTTPClientFor(ts.rest)
	if err != nil {
		t.Fatal(err)
	}
	cases := badCases()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, status, raw := do(t, httpClient, ts.rest.Host, c)
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
	after := snapshot(t, ts)
	if d := snapshotDiff(before, after); d != "" {
		t.Errorf("stored data changed: %s", d)
	}
	t.Logf("bad-input suite: %d malformed requests", len(cases))
	fmt.Printf("bad-input suite: %d malformed requests\n", len(cases))
	if len(cases) < 100 {
		t.Errorf("only %d cases, want at least 100", len(cases))
	}
}

func do(t *testing.T, c *http.Client, host string, bc badCase) (int, *metav1.Status, string) {
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
		req.Header.Set("Content-Type", jsonCT)
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

var snapshotResources = []schema.GroupVersionResource{
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
}

// snapshot lists every resource the suite writes to: resource/ns/name@rv.
func snapshot(t *testing.T, ts *testServer) []string {
	t.Helper()
	var out []string
	for _, gvr := range snapshotResources {
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

func snapshotDiff(before, after []string) string {
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
