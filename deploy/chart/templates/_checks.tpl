{{/*
Values that gpulint serve or the API server would refuse, refused at render time instead with
the value to change.
*/}}
{{- define "gpulint.checks" -}}
{{- $serve := .Values.serve }}
{{- if lt (int .Values.replicas) 1 }}
{{- fail "replicas must be at least 1 (2 or more keep the webhook answering through a node drain)" }}
{{- end }}
{{- $budget := .Values.podDisruptionBudget }}
{{- if and $budget.enabled (not (kindIs "string" $budget.minAvailable)) (ge (int $budget.minAvailable) (int .Values.replicas)) }}
{{- fail (printf "podDisruptionBudget.minAvailable (%v) must be below replicas (%v): a node drain could never evict a webhook pod" $budget.minAvailable .Values.replicas) }}
{{- end }}
{{- if not (has .Values.webhook.failurePolicy (list "Ignore" "Fail")) }}
{{- fail (printf "webhook.failurePolicy must be Ignore or Fail, not %v" .Values.webhook.failurePolicy) }}
{{- end }}
{{- $timeout := float64 .Values.webhook.timeoutSeconds }}
{{- if or (lt $timeout 1.0) (gt $timeout 30.0) (ne $timeout (float64 (int .Values.webhook.timeoutSeconds))) }}
{{- fail (printf "webhook.timeoutSeconds must be a whole number of seconds from 1 to 30 (the API server's limits), not %v" .Values.webhook.timeoutSeconds) }}
{{- end }}
{{- if ge (float64 $serve.deadline) $timeout }}
{{- fail (printf "serve.deadline (%v s) must be below webhook.timeoutSeconds (%v s): gpulint must answer before the API server gives up" $serve.deadline .Values.webhook.timeoutSeconds) }}
{{- end }}
{{- if not (has $serve.denyOn (list "error" "warning" "never")) }}
{{- fail (printf "serve.denyOn must be error, warning or never, not %v" $serve.denyOn) }}
{{- end }}
{{- if gt (addf $serve.shutdownDelay $serve.shutdownTimeout) (float64 .Values.terminationGracePeriodSeconds) }}
{{- fail (printf "serve.shutdownDelay + serve.shutdownTimeout (%v s) must fit in terminationGracePeriodSeconds (%v s), or the kubelet kills requests in flight" (addf $serve.shutdownDelay $serve.shutdownTimeout) .Values.terminationGracePeriodSeconds) }}
{{- end }}
{{- if and $serve.noCluster .Values.prometheus.url }}
{{- fail "prometheus.url needs the cluster caches (the live check reads the cluster's adapter ConfigMaps and HPAs): set serve.noCluster=false, or leave prometheus.url empty" }}
{{- end }}
{{- with .Values.clientAuth }}
{{- if and .enabled (eq (empty .caConfigMap) (empty .caSecret)) }}
{{- fail "clientAuth.enabled needs the CA bundle in exactly one of clientAuth.caConfigMap and clientAuth.caSecret (a ConfigMap or Secret of the release namespace)" }}
{{- end }}
{{- end }}
{{- if not (has .Values.tls.mode (list "self-signed" "cert-manager")) }}
{{- fail (printf "tls.mode must be self-signed or cert-manager, not %v" .Values.tls.mode) }}
{{- end }}
{{- if not (has .Values.podAntiAffinity (list "preferred" "required" "none")) }}
{{- fail (printf "podAntiAffinity must be preferred, required or none, not %v" .Values.podAntiAffinity) }}
{{- end }}
{{- if and .Values.webhook.matchConditions.enabled (not (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version)) }}
{{- fail (printf "webhook.matchConditions.enabled needs Kubernetes 1.30 or newer (admissionregistration.k8s.io/v1 matchConditions), and Helm renders for %s (the cluster's version on install and upgrade, --kube-version with helm template): set webhook.matchConditions.enabled=false for an older cluster" .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- end }}
