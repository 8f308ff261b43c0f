package mirror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/yaml"
)

// bufferedResponse holds an answer until it is sent.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newBufferedResponse() *bufferedResponse { return &bufferedResponse{header: http.Header{}} }

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *bufferedResponse) writeTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.WriteHeader(b.code)
	w.Write(b.body.Bytes()) //nolint:errcheck // the client went away
}

// decode reads a create or update body (JSON, YAML or protobuf).
func (wt *writeThrough) decode(body []byte) (*unstructured.Unstructured, error) {
	return decodeBody(wt.r.Header.Get("Content-Type"), body, wt.decoder)
}

// decodeBody reads a body of contentType (JSON, YAML or protobuf, which
// decoder reads) as an object.
func decodeBody(contentType string, body []byte, decoder runtime.Decoder) (*unstructured.Unstructured, error) {
	mediaType, _, _ := mime.ParseMediaType(contentType)
	var data []byte
	switch mediaType {
	case runtime.ContentTypeProtobuf:
		obj, gvk, err := decoder.Decode(body, nil, nil)
		if err != nil {
			return nil, err
		}
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
		if data, err = json.Marshal(obj); err != nil {
			return nil, err
		}
	case runtime.ContentTypeYAML:
		var err error
		if data, err = yaml.YAMLToJSON(body); err != nil {
			return nil, err
		}
	default:
		data = body
	}
	// A body may leave apiVersion and kind out: the URL says them, as
	// kube-apiserver accepts.
	var object map[string]any
	if err := json.Unmarshal(data, &object); err != nil {
		return nil, err
	}
	if object == nil {
		return nil, fmt.Errorf("the body is not an object")
	}
	return &unstructured.Unstructured{Object: object}, nil
}

// serveLocal answers with the local copy, read as a GET of it through the
// local server (its encoding, negotiated as for any read), with the
// upstream's status code (201 for a create).
func (wt *writeThrough) serveLocal(code int, name string) {
	info := *wt.info
	info.Verb, info.Name = "get", name
	path := wt.r.URL.Path
	if wt.info.Verb == "create" {
		path = strings.TrimSuffix(path, "/") + "/" + name
	}
	r := wt.r.Clone(request.WithRequestInfo(wt.r.Context(), &info))
	r.Method = http.MethodGet
	r.URL.Path, r.URL.RawPath, r.URL.RawQuery = path, "", ""
	r.Body, r.ContentLength = http.NoBody, 0
	r.Header.Del("Content-Type")
	wt.next.ServeHTTP(&codeWriter{ResponseWriter: wt.w, code: code}, r)
}

// codeWriter replaces a 200 with code, when set, and records the code
// written.
type codeWriter struct {
	http.ResponseWriter
	code    int
	written int
}

func (c *codeWriter) WriteHeader(code int) {
	if code == http.StatusOK && c.code != 0 {
		code = c.code
	}
	c.written = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeWriter) Write(b []byte) (int, error) {
	if c.written == 0 {
		c.written = http.StatusOK
	}
	return c.ResponseWriter.Write(b)
}

func (c *codeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (wt *writeThrough) writeRaw(code int, raw []byte) {
	wt.w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	wt.w.WriteHeader(code)
	wt.w.Write(raw) //nolint:errcheck // the client went away
}

// refuse answers 503 naming the upstream, at once and with no Retry-After:
// client-go retries a 503 that has one ten times before its caller hears
// of it.
func (wt *writeThrough) refuse(cause error) {
	writeRefused.Inc()
	name := wt.info.Name
	if name == "" {
		name = "(new)"
	}
	why := ""
	if cause != nil {
		why = " (" + cause.Error() + ")"
	}
	err := apierrors.NewServiceUnavailable(fmt.Sprintf("%s %s/%s is mirrored from the upstream %s, which is not reachable%s: writes to it are refused until the link is back",
		wt.gr, wt.info.Namespace, name, wt.u.host, why))
	err.ErrStatus.Details = &metav1.StatusDetails{Group: wt.gr.Group, Kind: wt.gr.Resource, Name: wt.info.Name}
	responsewriters.ErrorNegotiated(err, wt.serializer, wt.gv, wt.w, wt.r)
}

// fail answers err, its message prefixed.
func (wt *writeThrough) fail(err error, prefix string) {
	status := responsewriters.ErrorToAPIStatus(err)
	if prefix != "" {
		status.Message = prefix + status.Message
	}
	responsewriters.ErrorNegotiated(&apierrors.StatusError{ErrStatus: *status}, wt.serializer, wt.gv, wt.w, wt.r)
}
