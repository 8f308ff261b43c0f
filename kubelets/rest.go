package kubelets

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericrest "k8s.io/apiserver/pkg/registry/generic/rest"
	"k8s.io/apiserver/pkg/registry/rest"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// extendWebSocketsToKubelet is the feature a kubelet declares
// (node.status.declaredFeatures) when it serves exec, attach and
// port-forward over WebSocket itself; for the others the API translates,
// as kube-apiserver does (KEP-4006).
const extendWebSocketsToKubelet = "ExtendWebSocketsToKubelet"

// Kubelets serves the subresources that reach a node's kubelet.
type Kubelets struct {
	pods, nodes rest.Getter
	authz       authorizer.Authorizer
	// kubelet verifies the kubelet's serving certificate, insecure not
	// (pods/log's insecureSkipTLSVerifyBackend); pod reaches pods
	// (pods/proxy), with no client certificate.
	kubelet, insecure *http.Transport
	pod               *http.Transport
}

// New connects to kubelets with creds, dialling with dial (a net.Dialer's
// when nil), finding pods and nodes with the getters (the stores).
func New(pods, nodes rest.Getter, creds Credentials, authz authorizer.Authorizer, dial DialContext) *Kubelets {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	k := &Kubelets{pods: pods, nodes: nodes, authz: authz}
	k.kubelet, k.insecure = transports(creds, dial)
	k.pod = &http.Transport{
		DialContext: dial,
		// As kube-apiserver's proxy transport: a pod's certificate
		// is not checked.
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
	}
	return k
}

// Storage is each subresource by its name in the core group.
func (k *Kubelets) Storage() map[string]rest.Storage {
	return map[string]rest.Storage{
		"pods/log":         &logREST{k},
		"pods/exec":        &streamREST{k: k, kind: "exec"},
		"pods/attach":      &streamREST{k: k, kind: "attach"},
		"pods/portforward": &streamREST{k: k, kind: "portforward"},
		"pods/proxy":       &podProxyREST{k},
		"nodes/proxy":      &nodeProxyREST{k},
	}
}

// Close drops the idle connections to kubelets and pods.
func (k *Kubelets) Close() {
	for _, t := range []*http.Transport{k.kubelet, k.insecure, k.pod} {
		t.CloseIdleConnections()
	}
}

// logREST is pods/log: a stream of the kubelet's containerLogs.
type logREST struct{ k *Kubelets }

var (
	_ rest.GetterWithOptions = (*logREST)(nil)
	_ rest.StorageMetadata   = (*logREST)(nil)
)

func (r *logREST) New() runtime.Object { return &corev1.Pod{} }
func (r *logREST) Destroy()            {}

func (r *logREST) NewGetOptions() (runtime.Object, bool, string) {
	return &corev1.PodLogOptions{}, false, ""
}

// ProducesMIMETypes and ProducesObject describe the text log in the
// OpenAPI, as upstream's LogREST does.
func (r *logREST) ProducesMIMETypes(string) []string { return []string{"text/plain"} }
func (r *logREST) ProducesObject(string) any         { return "" }

func (r *logREST) Get(ctx context.Context, name string, options runtime.Object) (runtime.Object, error) {
	opts, ok := options.(*corev1.PodLogOptions)
	if !ok {
		return nil, fmt.Errorf("invalid options object: %#v", options)
	}
	if errs := validateLogOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, name, errs)
	}
	pod, err := getPod(ctx, r.k.pods, name)
	if err != nil {
		return nil, err
	}
	c, err := container(pod, opts.Container)
	if err != nil {
		return nil, err
	}
	streamer := &genericrest.LocationStreamer{
		ContentType:     "text/plain",
		Flush:           opts.Follow,
		ResponseChecker: genericrest.NewGenericHttpResponseChecker(corev1.Resource("pods/log"), name),
		RedirectChecker: genericrest.PreventRedirects,
	}
	if pod.Spec.NodeName == "" {
		// As upstream: a pod on no node has no log yet, an empty one.
		return streamer, nil
	}
	n, err := locate(ctx, r.k.nodes, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	streamer.Location = n.url(fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, c), logQuery(opts))
	streamer.Transport = r.k.kubelet
	if opts.InsecureSkipTLSVerifyBackend {
		streamer.Transport = r.k.insecure
	}
	return streamer, nil
}

// validateLogOptions is upstream's ValidatePodLogOptions with
// PodLogsQuerySplitStreams off (its default in 1.37).
func validateLogOptions(opts *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if opts.TailLines != nil && *opts.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *opts.TailLines, "must be greater than or equal to 0"))
	}
	if opts.LimitBytes != nil && *opts.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *opts.LimitBytes, "must be greater than 0"))
	}
	switch {
	case opts.SinceSeconds != nil && opts.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case opts.SinceSeconds != nil && *opts.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *opts.SinceSeconds, "must be greater than 0"))
	}
	if opts.Stream != nil {
		errs = append(errs, field.Forbidden(field.NewPath("stream"), "may not be specified"))
	}
	return errs
}

// logQuery is the kubelet's query for opts (upstream's LogLocation).
func logQuery(opts *corev1.PodLogOptions) url.Values {
	q := url.Values{}
	for name, on := range map[string]bool{"follow": opts.Follow, "previous": opts.Previous, "timestamps": opts.Timestamps} {
		if on {
			q.Set(name, "true")
		}
	}
	for name, v := range map[string]*int64{"sinceSeconds": opts.SinceSeconds, "tailLines": opts.TailLines, "limitBytes": opts.LimitBytes} {
		if v != nil {
			q.Set(name, strconv.FormatInt(*v, 10))
		}
	}
	if opts.SinceTime != nil {
		q.Set("sinceTime", opts.SinceTime.Format(time.RFC3339))
	}
	return q
}

// streamREST is pods/exec, pods/attach and pods/portforward: the
// request's upgraded connection spliced to the kubelet's, with upstream's
// upgrade-aware proxy.
type streamREST struct {
	k    *Kubelets
	kind string
}

var _ rest.Connecter = (*streamREST)(nil)

func (r *streamREST) New() runtime.Object { return r.options() }
func (r *streamREST) Destroy()            {}

func (r *streamREST) options() runtime.Object {
	switch r.kind {
	case "exec":
		return &corev1.PodExecOptions{}
	case "attach":
		return &corev1.PodAttachOptions{}
	}
	return &corev1.PodPortForwardOptions{}
}

func (r *streamREST) NewConnectOptions() (runtime.Object, bool, string) {
	return r.options(), false, ""
}

// ConnectMethods: GET too, for browsers' and kubectl's WebSockets.
func (r *streamREST) ConnectMethods() []string { return []string{"GET", "POST"} }

func (r *streamREST) Connect(ctx context.Context, name string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	// A WebSocket upgrade is a GET, authorized as get: it must be
	// allowed create too (kubernetes/kubernetes#133515, upstream's
	// AuthorizePodWebsocketUpgradeCreatePermission, on by default).
	if err := authorizeVerb(ctx, r.k.authz, "create"); err != nil {
		return nil, err
	}
	pod, err := getPod(ctx, r.k.pods, name)
	if err != nil {
		return nil, err
	}
	var path string
	query := url.Values{}
	var streams translator.Options
	switch opts := options.(type) {
	case *corev1.PodExecOptions:
		c, err := container(pod, opts.Container)
		if err != nil {
			return nil, err
		}
		path = fmt.Sprintf("/exec/%s/%s/%s", pod.Namespace, pod.Name, c)
		streams = translator.Options{Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY}
		for _, c := range opts.Command {
			query.Add("command", c)
		}
	case *corev1.PodAttachOptions:
		c, err := container(pod, opts.Container)
		if err != nil {
			return nil, err
		}
		path = fmt.Sprintf("/attach/%s/%s/%s", pod.Namespace, pod.Name, c)
		streams = translator.Options{Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY}
	case *corev1.PodPortForwardOptions:
		path = fmt.Sprintf("/portForward/%s/%s", pod.Namespace, pod.Name)
		if len(opts.Ports) > 0 {
			ports := make([]string, len(opts.Ports))
			for i, p := range opts.Ports {
				ports[i] = strconv.Itoa(int(p))
			}
			query.Set(corev1.PortHeader, strings.Join(ports, ","))
		}
	default:
		return nil, fmt.Errorf("invalid options object: %#v", options)
	}
	for param, on := range map[string]bool{corev1.ExecStdinParam: streams.Stdin, corev1.ExecStdoutParam: streams.Stdout, corev1.ExecStderrParam: streams.Stderr, corev1.ExecTTYParam: streams.Tty} {
		if on {
			query.Set(param, "1")
		}
	}
	if pod.Spec.NodeName == "" {
		return nil, noHost(name)
	}
	n, err := locate(ctx, r.k.nodes, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	location := n.url(path, query)
	handler := proxy.NewUpgradeAwareHandler(location, r.k.kubelet, false, true, proxy.NewErrorResponder(responder))
	if n.supports(extendWebSocketsToKubelet) {
		return handler, nil
	}
	// A kubelet older than 1.36 speaks SPDY only: the API translates
	// WebSocket clients (kubectl since 1.31) as kube-apiserver does.
	if r.kind == "portforward" {
		return translator.NewTranslatingHandler(handler, translator.NewTunnelingHandler(handler), wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
	}
	return translator.NewTranslatingHandler(handler, translator.NewStreamTranslatorHandler(location, r.k.kubelet, 0, streams), wsstream.IsWebSocketRequestWithStreamCloseProtocol), nil
}

// authorizeVerb asks authz whether the request's user may also verb the
// request's resource: upstream's ensureAuthorizedForVerb.
func authorizeVerb(ctx context.Context, authz authorizer.Authorizer, verb string) error {
	info, ok := genericapirequest.RequestInfoFrom(ctx)
	if !ok {
		return apierrors.NewInternalError(errors.New("no request info in context"))
	}
	if info.Verb == verb {
		return nil
	}
	attrs, err := filters.GetAuthorizerAttributes(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("error building authorizer attributes: %w", err))
	}
	decision, reason, err := authz.Authorize(ctx, overrideVerb{Attributes: attrs, verb: verb})
	if err != nil {
		return err
	}
	if decision != authorizer.DecisionAllow {
		return apierrors.NewForbidden(schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Name, errors.New(reason))
	}
	return nil
}

type overrideVerb struct {
	authorizer.Attributes
	verb string
}

func (o overrideVerb) GetVerb() string { return o.verb }

// proxyMethods are the methods pods/proxy and nodes/proxy forward.
var proxyMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// nodeProxyREST is nodes/proxy: the kubelet's own API (healthz, pods,
// stats, metrics).
type nodeProxyREST struct{ k *Kubelets }

var _ rest.Connecter = (*nodeProxyREST)(nil)

func (r *nodeProxyREST) New() runtime.Object      { return &corev1.NodeProxyOptions{} }
func (r *nodeProxyREST) Destroy()                 {}
func (r *nodeProxyREST) ConnectMethods() []string { return proxyMethods }
func (r *nodeProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.NodeProxyOptions{}, true, "path"
}

// Connect proxies to the kubelet's port only: kube-apiserver also reaches
// any other port of the node ("https:node:port") with its proxy
// transport, which on a gateway would open the node's every service to
// the API's users; that is refused.
func (r *nodeProxyREST) Connect(ctx context.Context, id string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.NodeProxyOptions)
	if !ok {
		return nil, fmt.Errorf("invalid options object: %#v", options)
	}
	scheme, name, port, valid := utilnet.SplitSchemeNamePort(id)
	if !valid {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid node request %q", id))
	}
	n, err := locate(ctx, r.k.nodes, name)
	if err != nil {
		return nil, err
	}
	if (scheme != "" && scheme != "https") || (port != "" && port != n.port) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("node %s: kubestore proxies to the kubelet's port (https, %s) only, not to %q", name, n.port, id))
	}
	location := n.url(utilnet.JoinPreservingTrailingSlash("/", opts.Path), nil)
	return proxy.NewUpgradeAwareHandler(location, r.k.kubelet, true, false, proxy.NewErrorResponder(responder)), nil
}

// podProxyREST is pods/proxy: HTTP to a port of the pod's IP, as
// kube-apiserver's (upstream's ResourceLocation).
type podProxyREST struct{ k *Kubelets }

var _ rest.Connecter = (*podProxyREST)(nil)

func (r *podProxyREST) New() runtime.Object      { return &corev1.PodProxyOptions{} }
func (r *podProxyREST) Destroy()                 {}
func (r *podProxyREST) ConnectMethods() []string { return proxyMethods }
func (r *podProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodProxyOptions{}, true, "path"
}

func (r *podProxyREST) Connect(ctx context.Context, id string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.PodProxyOptions)
	if !ok {
		return nil, fmt.Errorf("invalid options object: %#v", options)
	}
	scheme, name, port, valid := utilnet.SplitSchemeNamePort(id)
	if !valid {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid pod request %q", id))
	}
	pod, err := getPod(ctx, r.k.pods, name)
	if err != nil {
		return nil, err
	}
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	ip := net.ParseIP(pod.Status.PodIP)
	if ip == nil || !ip.IsGlobalUnicast() {
		return nil, apierrors.NewBadRequest("address not allowed")
	}
	if scheme == "" {
		scheme = "http"
	}
	host := pod.Status.PodIP
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if ip.To4() == nil {
		host = "[" + host + "]"
	}
	location := &url.URL{Scheme: scheme, Host: host, Path: utilnet.JoinPreservingTrailingSlash("/", opts.Path)}
	return proxy.NewUpgradeAwareHandler(location, r.k.pod, true, false, proxy.NewErrorResponder(responder)), nil
}
