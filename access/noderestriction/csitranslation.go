/*
Copyright 2019 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Ported from k8s.io/csi-translation-lib translate.go@v0.37.2 and
// plugins/{aws_ebs,azure_disk,azure_file,gce_pd,openstack_cinder,portworx,vsphere_volume}.go@v0.37.2.
// Changes: NodeRestriction only needs the CSI driver an in-tree volume is
// migrated to, so instead of building the translated PersistentVolume this
// returns the driver's name, or the error the translation would fail with
// (the in-tree plugins' input checks are kept; topology translation, which
// cannot fail, is not ported).

package noderestriction

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The CSI drivers that the migratable in-tree volume plugins translate to.
const (
	awsEBSDriverName    = "ebs.csi.aws.com"
	azureDiskDriverName = "disk.csi.azure.com"
	azureFileDriverName = "file.csi.azure.com"
	gcePDDriverName     = "pd.csi.storage.gke.io"
	cinderDriverName    = "cinder.csi.openstack.org"
	portworxDriverName  = "pxd.portworx.com"
	vSphereDriverName   = "csi.vsphere.vmware.com"
)

// isInlineMigratable is CSITranslator.IsInlineMigratable: whether a pod's
// inline volume is of an in-tree plugin with CSI migration logic.
func isInlineMigratable(vol *v1.Volume) bool {
	return vol != nil && (vol.AWSElasticBlockStore != nil || vol.AzureDisk != nil || vol.AzureFile != nil ||
		vol.GCEPersistentDisk != nil || vol.Cinder != nil || vol.PortworxVolume != nil || vol.VsphereVolume != nil)
}

// isPVMigratable is CSITranslator.IsPVMigratable: whether a persistent
// volume is of an in-tree plugin with CSI migration logic.
func isPVMigratable(pv *v1.PersistentVolume) bool {
	return pv != nil && (pv.Spec.AWSElasticBlockStore != nil || pv.Spec.AzureDisk != nil || pv.Spec.AzureFile != nil ||
		pv.Spec.GCEPersistentDisk != nil || pv.Spec.Cinder != nil || pv.Spec.PortworxVolume != nil || pv.Spec.VsphereVolume != nil)
}

// translateInlineVolumeToCSIDriver is the driver name of
// CSITranslator.TranslateInTreeInlineVolumeToCSI's result, or its error.
func translateInlineVolumeToCSIDriver(volume *v1.Volume) (string, error) {
	if volume == nil {
		return "", fmt.Errorf("persistent volume was nil")
	}
	switch {
	case volume.AWSElasticBlockStore != nil:
		if _, err := kubernetesVolumeIDToEBSVolumeID(volume.AWSElasticBlockStore.VolumeID); err != nil {
			return "", fmt.Errorf("failed to translate Kubernetes ID to EBS Volume ID %v", err)
		}
		return awsEBSDriverName, nil
	case volume.AzureDisk != nil:
		if err := checkAzureDiskKind(volume.AzureDisk.Kind); err != nil {
			return "", err
		}
		return azureDiskDriverName, nil
	case volume.AzureFile != nil:
		return azureFileDriverName, nil
	case volume.GCEPersistentDisk != nil:
		return gcePDDriverName, nil
	case volume.Cinder != nil:
		return cinderDriverName, nil
	case volume.PortworxVolume != nil:
		return portworxDriverName, nil
	case volume.VsphereVolume != nil:
		return vSphereDriverName, nil
	}
	return "", fmt.Errorf("could not find in-tree plugin translation logic for %#v", volume.Name)
}

// translatePVToCSIDriver is the driver name of
// CSITranslator.TranslateInTreePVToCSI's result, or its error.
func translatePVToCSIDriver(pv *v1.PersistentVolume) (string, error) {
	if pv == nil {
		return "", fmt.Errorf("persistent volume was nil")
	}
	switch {
	case pv.Spec.AWSElasticBlockStore != nil:
		if _, err := kubernetesVolumeIDToEBSVolumeID(pv.Spec.AWSElasticBlockStore.VolumeID); err != nil {
			return "", fmt.Errorf("failed to translate Kubernetes ID to EBS Volume ID %v", err)
		}
		return awsEBSDriverName, nil
	case pv.Spec.AzureDisk != nil:
		if err := checkAzureDiskKind(pv.Spec.AzureDisk.Kind); err != nil {
			return "", err
		}
		return azureDiskDriverName, nil
	case pv.Spec.AzureFile != nil:
		// Secret is required when mounting a volume but pod presence cannot be assumed - we should not try to read pod now.
		namespace := ""
		// Try to read SecretNamespace from source pv.
		if pv.Spec.AzureFile.SecretNamespace != nil {
			namespace = *pv.Spec.AzureFile.SecretNamespace
		} else if pv.Spec.ClaimRef != nil {
			// Try to read namespace from ClaimRef which should be always present.
			namespace = pv.Spec.ClaimRef.Namespace
		}
		if len(namespace) == 0 {
			return "", fmt.Errorf("could not find a secret namespace in PersistentVolumeSource or ClaimRef")
		}
		return azureFileDriverName, nil
	case pv.Spec.GCEPersistentDisk != nil:
		// depend on which version it migrates from, the label could be failuredomain beta or topology GA version
		zonesLabel := pv.Labels[v1.LabelFailureDomainBetaZone]
		if zonesLabel == "" {
			zonesLabel = pv.Labels[v1.LabelTopologyZone]
		}
		if zones := strings.Split(zonesLabel, labelMultiZoneDelimiter); len(zones) > 1 {
			// Regional
			if _, err := gceGetRegionFromZones(zones); err != nil {
				return "", fmt.Errorf("failed to get region from zones: %v", err)
			}
		}
		return gcePDDriverName, nil
	case pv.Spec.Cinder != nil:
		return cinderDriverName, nil
	case pv.Spec.PortworxVolume != nil:
		return portworxDriverName, nil
	case pv.Spec.VsphereVolume != nil:
		return vSphereDriverName, nil
	}
	return "", fmt.Errorf("could not find in-tree plugin translation logic for %#v", pv.Name)
}

// checkAzureDiskKind is the Azure Disk translator's check that only managed
// disks migrate.
func checkAzureDiskKind(kind *v1.AzureDataDiskKind) error {
	if kind != nil && !strings.EqualFold(string(*kind), string(v1.AzureManagedDisk)) {
		return fmt.Errorf("kind(%v) is not supported in csi migration", *kind)
	}
	return nil
}

// awsVolumeRegMatch represents Regex Match for AWS volume.
var awsVolumeRegMatch = regexp.MustCompile("^vol-[^/]*$")

// kubernetesVolumeIDToEBSVolumeID translates Kubernetes volume ID to EBS volume ID
// KubernetesVolumeID forms:
//   - aws://<zone>/<awsVolumeId>
//   - aws:///<awsVolumeId>
//   - <awsVolumeId>
//
// EBS Volume ID form:
//   - vol-<alphanumberic>
//
// This translation shouldn't be needed and should be fixed in long run
// See https://github.com/kubernetes/kubernetes/issues/73730
func kubernetesVolumeIDToEBSVolumeID(kubernetesID string) (string, error) {
	// name looks like aws://availability-zone/awsVolumeId

	// The original idea of the URL-style name was to put the AZ into the
	// host, so we could find the AZ immediately from the name without
	// querying the API.  But it turns out we don't actually need it for
	// multi-AZ clusters, as we put the AZ into the labels on the PV instead.
	// However, if in future we want to support multi-AZ cluster
	// volume-awareness without using PersistentVolumes, we likely will
	// want the AZ in the host.
	if !strings.HasPrefix(kubernetesID, "aws://") {
		// Assume a bare aws volume id (vol-1234...)
		return kubernetesID, nil
	}
	url, err := url.Parse(kubernetesID)
	if err != nil {
		// TODO: Maybe we should pass a URL into the Volume functions
		return "", fmt.Errorf("Invalid disk name (%s): %v", kubernetesID, err)
	}
	if url.Scheme != "aws" {
		return "", fmt.Errorf("Invalid scheme for AWS volume (%s)", kubernetesID)
	}

	awsID := url.Path
	awsID = strings.Trim(awsID, "/")

	// We sanity check the resulting volume; the two known formats are
	// vol-12345678 and vol-12345678abcdef01
	if !awsVolumeRegMatch.MatchString(awsID) {
		return "", fmt.Errorf("Invalid format for AWS volume (%s)", kubernetesID)
	}

	return awsID, nil
}

// labelMultiZoneDelimiter separates the zones of a regional disk in a zone label.
const labelMultiZoneDelimiter = "__"

func gceGetRegionFromZones(zones []string) (string, error) {
	regions := sets.String{}
	if len(zones) < 1 {
		return "", fmt.Errorf("no zones specified")
	}
	for _, zone := range zones {
		// Zone expected format {locale}-{region}-{zone}
		splitZone := strings.Split(zone, "-")
		if len(splitZone) != 3 {
			return "", fmt.Errorf("zone in unexpected format, expected: {locale}-{region}-{zone}, got: %v", zone)
		}
		regions.Insert(strings.Join(splitZone[0:2], "-"))
	}
	if regions.Len() != 1 {
		return "", fmt.Errorf("multiple or no regions gotten from zones, got: %v", regions)
	}
	return regions.UnsortedList()[0], nil
}
