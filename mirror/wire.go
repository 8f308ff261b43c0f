package mirror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The mirror's reads of the upstream arrive as protobuf for the kinds
// k8s.io/api defines, as the kubelet's and kube-proxy's do: a Lease's
// watch event is 529 bytes where JSON is 859, and objects 0.50–0.59 of
// their JSON (docs/PERFORMANCE.md, "The cluster's cost per gateway").
// The mirror works on unstructured objects, so each answer is decoded into
// its Go type and converted, as client-go's dynamic client would have
// decoded its JSON. A forwarded create or update goes up as protobuf too
// (body); the reconciler's writes and every patch stay JSON. Custom
// resources, which kube-apiserver serves only as JSON, and kinds the wire
// scheme lacks keep the JSON client.

// wireGroups are the API groups whose kinds the mirror reads as protobuf:
// those kubestore serves built in.
var wireGroups = []func(*runtime.Scheme) error{
	corev1.AddToScheme, coordinationv1.AddToScheme, discoveryv1.AddToScheme, networkingv1.AddToScheme,
	resourcev1.AddToScheme, certificatesv1.AddToScheme, storagev1.AddToScheme, nodev1.AddToScheme,
}

// wire is how the mirror's clients speak to the upstream.
type wire struct {
	scheme *runtime.Scheme
	proto  runtime.SerializerInfo
	// protoGVRs are the resources whose kind the wire scheme decodes.
	protoGVRs map[schema.GroupVersionResource]bool
}

func newWire() (*wire, error) {
	scheme := runtime.NewScheme()
	for _, add := range wireGroups {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	protoGVRs := map[schema.GroupVersionResource]bool{}
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		// Kinds whose guessed plural is wrong (Endpoints) just stay JSON.
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		protoGVRs[gvr] = true
	}
	return &wire{scheme: scheme, proto: wireProtobuf(scheme), protoGVRs: protoGVRs}, nil
}

// protoAccept is the Accept of a read the wire decodes as protobuf: JSON
// second, for what the upstream serves only as JSON.
const protoAccept = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON

// config is cfg for an unversioned client of the upstream's resources, as
// client-go's dynamic client sets one up, that asks for JSON and reads
// protobuf answers too (a Status of a write asked as protobuf).
func (w *wire) config(cfg *rest.Config) *rest.Config {
	c := dynamic.ConfigFor(cfg)
	c.NegotiatedSerializer = wireSerializer{json: c.NegotiatedSerializer, proto: w.proto}
	c.GroupVersion = nil
	c.APIPath = "/if-you-see-this-search-for-the-break"
	return c
}

// client is a rest client of cfg (config's) on httpClient.
func (w *wire) client(cfg *rest.Config, httpClient *http.Client) (rest.Interface, error) {
	if httpClient == nil {
		return rest.UnversionedRESTClientFor(cfg)
	}
	return rest.UnversionedRESTClientForConfigAndClient(cfg, httpClient)
}

// clients makes the dynamic client of upstream and a rest client of the
// same configuration, on one connection pool.
func (w *wire) clients(upstream *rest.Config) (dynamic.Interface, rest.Interface, error) {
	cfg := w.config(upstream)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	jsonREST, err := w.client(cfg, httpClient)
	if err != nil {
		return nil, nil, err
	}
	pcfg := rest.CopyConfig(cfg)
	pcfg.AcceptContentTypes = protoAccept
	protoREST, err := w.client(pcfg, httpClient)
	if err != nil {
		return nil, nil, err
	}
	return wireClient{json: dynamic.New(jsonREST), proto: dynamic.New(protoREST), wire: w}, jsonREST, nil
}

// protobuf reports whether reads of gvr ask for protobuf.
func (w *wire) protobuf(gvr schema.GroupVersionResource) bool { return w.protoGVRs[gvr] }

// asJSON is a body of the upstream's (err the request's outcome) as JSON:
// protobuf (its magic number first) decoded and encoded again, anything
// else as it is. A body that does not decode fails the request.
func (w *wire) asJSON(body []byte, err error) ([]byte, error) {
	if !bytes.HasPrefix(body, protobufMagic) {
		return body, err
	}
	obj, _, derr := w.proto.Serializer.Decode(body, nil, nil)
	if derr == nil {
		var data []byte
		if data, derr = json.Marshal(obj); derr == nil {
			return data, err
		}
	}
	return nil, errUnreadable{fmt.Errorf("reading the upstream's answer: %w", derr)}
}

// body is the request body of u, a write of gvr's, with its content type:
// protobuf, as the kubelet sends its own, when gvr is read as protobuf and
// u's Go type holds every field of u; JSON otherwise (a field this build
// does not know, which the upstream may, goes up as it came).
func (w *wire) body(gvr schema.GroupVersionResource, u *unstructured.Unstructured) ([]byte, string, error) {
	if w.protobuf(gvr) {
		// The strict conversion fails on a field the Go type lacks.
		if obj, err := w.scheme.New(u.GroupVersionKind()); err == nil &&
			runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true) == nil {
			var buf bytes.Buffer
			if err := w.proto.Serializer.Encode(obj, &buf); err == nil {
				return buf.Bytes(), runtime.ContentTypeProtobuf, nil
			}
		}
	}
	data, err := json.Marshal(u.Object)
	return data, runtime.ContentTypeJSON, err
}

// protobufMagic begins every protobuf body of kube-apiserver's.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// wireClient is a dynamic client that asks for protobuf for the resources
// of wireGroups and for JSON for every other.
type wireClient struct {
	json, proto dynamic.Interface
	wire        *wire
}

var _ dynamic.Interface = wireClient{}

func (c wireClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	if c.wire.protobuf(gvr) {
		return c.proto.Resource(gvr)
	}
	return c.json.Resource(gvr)
}

// wireProtobuf is the protobuf media type, its objects decoded as
// unstructured ones.
func wireProtobuf(scheme *runtime.Scheme) runtime.SerializerInfo {
	return runtime.SerializerInfo{
		MediaType:        runtime.ContentTypeProtobuf,
		MediaTypeType:    "application",
		MediaTypeSubType: "vnd.kubernetes.protobuf",
		Serializer:       asUnstructured{protobuf.NewSerializer(scheme, scheme)},
		StreamSerializer: &runtime.StreamSerializerInfo{
			// A watch's frames are metav1.WatchEvents, each object in it
			// decoded by Serializer.
			Serializer: protobuf.NewRawSerializer(scheme, scheme),
			Framer:     protobuf.LengthDelimitedFramer,
		},
	}
}

// wireSerializer adds protobuf to the dynamic client's JSON.
type wireSerializer struct {
	json  runtime.NegotiatedSerializer
	proto runtime.SerializerInfo
}

func (s wireSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return append(s.json.SupportedMediaTypes(), s.proto)
}

func (s wireSerializer) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return s.json.EncoderForVersion(e, gv)
}

func (s wireSerializer) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	if _, ok := d.(asUnstructured); ok {
		return d
	}
	return s.json.DecoderToVersion(d, gv)
}

// asUnstructured decodes protobuf into the typed object and converts it to
// what client-go's dynamic client decodes from JSON: an Unstructured, or
// an UnstructuredList whose items carry their apiVersion and kind. A
// Status, and what the caller asks for by type (a WatchEvent), stay typed.
type asUnstructured struct{ runtime.Serializer }

func (d asUnstructured) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch into.(type) {
	case nil, *unstructured.Unstructured, *unstructured.UnstructuredList:
	default:
		return d.Serializer.Decode(data, defaults, into)
	}
	obj, gvk, err := d.Serializer.Decode(data, defaults, nil)
	if err != nil {
		return nil, gvk, err
	}
	if _, ok := obj.(*metav1.Status); ok {
		return obj, gvk, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, gvk, err
	}
	content["apiVersion"], content["kind"] = gvk.GroupVersion().String(), gvk.Kind
	if !meta.IsListType(obj) {
		u, ok := into.(*unstructured.Unstructured)
		if !ok {
			if into != nil {
				return nil, gvk, fmt.Errorf("decoding %s into %T", gvk.Kind, into)
			}
			u = &unstructured.Unstructured{}
		}
		u.Object = content
		return u, gvk, nil
	}
	list, ok := into.(*unstructured.UnstructuredList)
	if !ok {
		if into != nil {
			return nil, gvk, fmt.Errorf("decoding %s into %T", gvk.Kind, into)
		}
		list = &unstructured.UnstructuredList{}
	}
	items, _ := content["items"].([]any)
	delete(content, "items")
	list.Object, list.Items = content, make([]unstructured.Unstructured, 0, len(items))
	itemKind := strings.TrimSuffix(gvk.Kind, "List")
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, gvk, fmt.Errorf("an item of %s is %T", gvk.Kind, item)
		}
		m["apiVersion"], m["kind"] = content["apiVersion"], itemKind
		list.Items = append(list.Items, unstructured.Unstructured{Object: m})
	}
	return list, gvk, nil
}
