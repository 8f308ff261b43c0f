package server

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	baseversion "k8s.io/component-base/version"
)

// Stamped at build time with -ldflags "-X github.com/kubestore/kubestore/server.version=…"
// (the Makefile: the VERSION file's release, or a development build of it).
// Unstamped, the version is the one the Go toolchain gives the main module
// (a pseudo-version from the checkout), else unstampedVersion.
var (
	version   = ""
	gitCommit = "unknown"
	buildDate = "1970-01-01T00:00:00Z"
)

// unstampedVersion is the version of a build that carries none: a
// development build, sorting before every release.
const unstampedVersion = "0.0.0-dev"

// Build describes this binary.
type Build struct {
	Version    string `json:"version"`
	GitCommit  string `json:"gitCommit"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
	Kubernetes string `json:"kubernetesAPI"`
	Etcd       string `json:"etcd"`
}

// BuildInfo returns the version of kubestore and of the Kubernetes and
// etcd code linked into it, read from the module versions.
func BuildInfo() Build {
	b := Build{
		Version:   strings.TrimPrefix(version, "v"),
		GitCommit: gitCommit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
		// Test binaries carry no module list; the minor is still known.
		Kubernetes: "v" + baseversion.DefaultKubeBinaryVersion + ".0",
		Etcd:       "unknown",
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		if mod := strings.TrimPrefix(info.Main.Version, "v"); b.Version == "" {
			if _, err := utilversion.ParseSemantic(mod); err == nil {
				b.Version = mod
			}
		}
		for _, m := range info.Deps {
			switch m.Path {
			case "k8s.io/apiserver":
				// Staging modules v0.X.Y ship with Kubernetes v1.X.Y.
				b.Kubernetes = "v1." + strings.TrimPrefix(m.Version, "v0.")
			case "go.etcd.io/etcd/server/v3":
				b.Etcd = m.Version
			}
		}
	}
	if b.Version == "" {
		b.Version = unstampedVersion
	}
	return b
}

// kubestoreVersion is the generic server's effective version with the
// /version document kubestore serves: the Kubernetes API version it
// implements, marked with kubestore's own version as build metadata, the
// way distributions mark theirs.
type kubestoreVersion struct {
	compatibility.MutableEffectiveVersion
	build Build
}

func newEffectiveVersion(b Build) (kubestoreVersion, error) {
	if !strings.HasPrefix(b.Kubernetes, "v1.") {
		return kubestoreVersion{}, fmt.Errorf("unknown Kubernetes API version %q", b.Kubernetes)
	}
	return kubestoreVersion{compatibility.NewEffectiveVersionFromString(strings.TrimPrefix(b.Kubernetes, "v"), "", ""), b}, nil
}

func (v kubestoreVersion) Info() *apimachineryversion.Info {
	info := v.MutableEffectiveVersion.Info()
	meta := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, strings.TrimPrefix(v.build.Version, "v"))
	info.GitVersion = v.build.Kubernetes + "+kubestore." + meta
	info.GitCommit = v.build.GitCommit
	info.GitTreeState = ""
	info.BuildDate = buildDate
	info.GoVersion = v.build.GoVersion
	info.Compiler = runtime.Compiler
	info.Platform = v.build.Platform
	return info
}

var (
	buildInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kubestore", Name: "build_info",
		Help:           "1, labelled with this binary's version, commit and the versions of the Kubernetes API and etcd it serves and embeds.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"version", "git_commit", "kubernetes_api", "etcd", "go_version"})
	registerBuildInfo sync.Once
)

// recordBuildInfo sets kubestore_build_info, once per process.
func recordBuildInfo(b Build) {
	registerBuildInfo.Do(func() {
		legacyregistry.MustRegister(buildInfo)
		buildInfo.WithLabelValues(b.Version, b.GitCommit, b.Kubernetes, b.Etcd, b.GoVersion).Set(1)
	})
}
