// Package cacher is the storage of every resource kubestore serves: one
// etcd client (to the embedded member etcdembed starts, or to an external
// cluster), and per resource the upstream etcd3 store with the upstream
// watch cache in front of it (k8s.io/apiserver/pkg/storage/cacher), sized
// and budgeted from the completed configuration. Every use of
// k8s.io/apiserver's storage internals stays in this package.
//
//	backend, err := cacher.Open(ctx, completed) // starts or dials etcd, waits until it answers
//	if err != nil { ... }
//	defer backend.Close()                       // after every store built on it was destroyed
//	getter := backend.RESTOptionsGetter(cacher.Resources{Scheme: scheme, Serializer: codecs})
//	// getter goes to genericregistry.Store.CompleteWithOptions for each resource;
//	// backend.Failed() is closed if the embedded etcd dies.
package cacher
