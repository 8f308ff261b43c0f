// Package serviceip holds the controllers of Services' cluster IPs that
// kube-apiserver runs beside its Service storage: the default ServiceCIDR
// controller (DefaultServiceCIDR; k8s.io/kubernetes
// pkg/controlplane/controller/defaultservicecidr), which keeps the
// ServiceCIDR "kubernetes" standing for --service-cluster-ip-range, the
// Service default/kubernetes and its endpoint (KubernetesService;
// upstream's pkg/controlplane/controller/kubernetesservice), and the
// repair of the ClusterIP allocator's records (Repair; upstream's
// pkg/registry/core/service/ipallocator/controller/repairip.go).
//
// The allocator itself is the Services' store's (registry.ClusterIPs): it
// claims an IP on create and releases it on delete, one record per IP in
// etcd (kubestore's own records, package records). The repair reads those
// records through the allocator and lists Services from the watch cache;
// the default ServiceCIDR controller writes through the loopback client.
// Several kubestores on one etcd may run both: each IP is claimed by an
// atomic create and released only while its record is unchanged; the
// default ServiceCIDR is created once (AlreadyExists to the others) and
// its status written on the resourceVersion read.
package serviceip
