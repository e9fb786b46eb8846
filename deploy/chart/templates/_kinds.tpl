{{/* Written by python -m gpulint.webhook.deploy from gpulint.kinds.registry:
edit the registry, not this file. */}}

{{/* The ClusterRole's (or serve.namespace's Role's) rules: the watched kinds. */}}
{{- define "gpulint.watchedRules" -}}
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects", "scaledjobs"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["autoscaling.aibrix.ai"]
  resources: ["podautoscalers"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["llmd.ai"]
  resources: ["variantautoscalings"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["autoscaling.k8s.io"]
  resources: ["verticalpodautoscalers"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["serving.kserve.io"]
  resources: ["inferenceservices", "llminferenceservices"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["apps.nvidia.com"]
  resources: ["nimservices"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["production-stack.vllm.ai"]
  resources: ["vllmruntimes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["kubeai.org"]
  resources: ["models"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["serving.knative.dev"]
  resources: ["services", "configurations"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets"]
  verbs: ["get", "list", "watch"]
# DRA: the claims pods name say whether they hold GPUs.
- apiGroups: ["resource.k8s.io"]
  resources: ["resourceclaimtemplates", "resourceclaims"]
  verbs: ["get", "list", "watch"]
# What bounds the evictions of a VerticalPodAutoscaler (GL112).
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch"]
{{- end }}

{{/* The workloads webhook's rules: the evaluated workload kinds. */}}
{{- define "gpulint.workloadWebhookRules" -}}
- apiGroups: ["apps"]
  apiVersions: ["v1"]
  resources: ["deployments", "statefulsets"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
{{- end }}

{{/* The scaling webhook's rules: every other evaluated kind. */}}
{{- define "gpulint.scalingWebhookRules" -}}
- apiGroups: ["autoscaling"]
  apiVersions: ["v2", "v2beta2"]
  resources: ["horizontalpodautoscalers"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["keda.sh"]
  apiVersions: ["v1alpha1"]
  resources: ["scaledobjects", "scaledjobs"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["autoscaling.aibrix.ai"]
  apiVersions: ["v1alpha1"]
  resources: ["podautoscalers"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["llmd.ai"]
  apiVersions: ["v1alpha1"]
  resources: ["variantautoscalings"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["autoscaling.k8s.io"]
  apiVersions: ["v1"]
  resources: ["verticalpodautoscalers"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["serving.kserve.io"]
  apiVersions: ["v1beta1"]
  resources: ["inferenceservices"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["serving.kserve.io"]
  apiVersions: ["v1alpha2", "v1alpha1"]
  resources: ["llminferenceservices"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["apps.nvidia.com"]
  apiVersions: ["v1alpha1"]
  resources: ["nimservices"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["production-stack.vllm.ai"]
  apiVersions: ["v1alpha1"]
  resources: ["vllmruntimes"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["kubeai.org"]
  apiVersions: ["v1"]
  resources: ["models"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["serving.knative.dev"]
  apiVersions: ["v1"]
  resources: ["services", "configurations"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
- apiGroups: ["resource.k8s.io"]
  apiVersions: ["v1", "v1beta2", "v1beta1"]
  resources: ["resourceclaimtemplates"]
  operations: ["CREATE", "UPDATE"]
  scope: Namespaced
{{- end }}

{{/* Namespace -> the ConfigMaps read there by name alone, as JSON. */}}
{{- define "gpulint.namedConfigMaps" -}}
{"knative-serving": ["config-autoscaler"]}
{{- end }}
