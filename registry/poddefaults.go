package registry

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

func defaultPod(p *corev1.Pod) {
	s := &p.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptrTo(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	// SetDefaults_Pod (pkg/apis/core/v1/defaults.go): enforced on pods,
	// not on pod templates.
	if *s.TerminationGracePeriodSeconds < 0 {
		s.TerminationGracePeriodSeconds = ptrTo(int64(1))
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	if s.EnableServiceLinks == nil {
		s.EnableServiceLinks = ptrTo(corev1.DefaultEnableServiceLinks)
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
	// A pod on the host's network listens on the host's ports (upstream
	// does this for pods, not for pod templates).
	if s.HostNetwork {
		for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
			for i := range cs {
				for j := range cs[i].Ports {
					if port := &cs[i].Ports[j]; port.HostPort == 0 {
						port.HostPort = port.ContainerPort
					}
				}
			}
		}
	}
}

func defaultContainer(c *corev1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if tag := imageTag(c.Image); tag == "" || tag == "latest" {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if f := c.Env[i].ValueFrom; f != nil {
			defaultFieldRef(f.FieldRef)
		}
	}
	// Requests default to limits, as the scheduler and kubelet expect.
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = limit.DeepCopy()
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
}

func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

func defaultFieldRef(f *corev1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

func defaultDownwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		defaultFieldRef(items[i].FieldRef)
	}
}

// serviceAccountTokenExpiration is the default lifetime of a projected
// service account token, upstream's.
const serviceAccountTokenExpiration = time.Hour

func defaultVolume(v *corev1.Volume) {
	vs := &v.VolumeSource
	if apiequality.Semantic.DeepEqual(*vs, corev1.VolumeSource{}) {
		vs.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	mode := int32(corev1.SecretVolumeSourceDefaultMode)
	if s := vs.Secret; s != nil && s.DefaultMode == nil {
		s.DefaultMode = ptrTo(mode)
	}
	if c := vs.ConfigMap; c != nil && c.DefaultMode == nil {
		c.DefaultMode = ptrTo(mode)
	}
	if d := vs.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = ptrTo(int32(corev1.DownwardAPIVolumeSourceDefaultMode))
		}
		defaultDownwardAPIItems(d.Items)
	}
	if p := vs.Projected; p != nil {
		if p.DefaultMode == nil {
			p.DefaultMode = ptrTo(int32(corev1.ProjectedVolumeSourceDefaultMode))
		}
		for i := range p.Sources {
			if d := p.Sources[i].DownwardAPI; d != nil {
				defaultDownwardAPIItems(d.Items)
			}
			if t := p.Sources[i].ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				t.ExpirationSeconds = ptrTo(int64(serviceAccountTokenExpiration / time.Second))
			}
		}
	}
	if h := vs.HostPath; h != nil && h.Type == nil {
		h.Type = ptrTo(corev1.HostPathUnset)
	}
}

// imageTag returns the tag of an image reference, "" without one.
func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		return "digest"
	}
	slash := strings.LastIndex(image, "/")
	if i := strings.LastIndex(image, ":"); i > slash {
		return image[i+1:]
	}
	return ""
}
