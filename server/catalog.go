package server

// catalog lists every built-in resource kubestore serves. Each call returns
// fresh definitions, so servers in one process share nothing.
func catalog() []*resourceDef {
	return []*resourceDef{
		namespaceDef(),
		podDef(),
		nodeDef(),
		configMapDef(),
		secretDef(),
		serviceDef(),
		endpointsDef(),
		eventDef(),
		serviceAccountDef(),
		leaseDef(),
		endpointSliceDef(),
	}
}
