variable "project_id" {
  description = "The GCP project of the pipeline bucket and of the GKE cluster that runs Kubeflow Pipelines (its Workload Identity pool is PROJECT.svc.id.goog)."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid GCP project id."
  }
}

variable "name" {
  description = "Prefix of the Google service account; matches infra/terraform's var.name."
  type        = string
  default     = "penguin"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,20}$", var.name))
    error_message = "name must be 2-21 lower-case letters, digits or '-', starting with a letter."
  }
}

variable "bucket" {
  description = "The pipeline bucket (pipeline.root's bucket; infra/terraform's output bucket)."
  type        = string
}

variable "namespace" {
  description = "The Kubernetes namespace runs go to: kubeflow.namespace in configs/kubeflow.yaml (a profile namespace on multi-user Kubeflow)."
  type        = string
  default     = "kubeflow"
  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.namespace))
    error_message = "namespace must be a Kubernetes namespace name."
  }
}

variable "kubernetes_service_account" {
  description = "The pods' Kubernetes service account: kubeflow.service_account in configs/kubeflow.yaml."
  type        = string
  default     = "penguin-pipeline"
  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", var.kubernetes_service_account))
    error_message = "kubernetes_service_account must be a Kubernetes service account name."
  }
}

variable "pubsub_topic" {
  description = "notify.pubsub_topic in configs/kubeflow.yaml (projects/P/topics/T); the pods' account may publish to it. Empty: no notification topic."
  type        = string
  default     = ""
  validation {
    condition     = var.pubsub_topic == "" || can(regex("^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/topics/[A-Za-z][A-Za-z0-9._~%+-]{2,254}$", var.pubsub_topic))
    error_message = "pubsub_topic must be empty or projects/PROJECT/topics/TOPIC."
  }
}

variable "vertex_endpoint" {
  description = "serving.target is vertex_endpoint: the pods' account may upload models and deploy them to endpoints (roles/aiplatform.user)."
  type        = bool
  default     = false
}

variable "canary_check_metrics" {
  description = "serving.check.before_run with serving.target vertex_endpoint: the pods' account may read Cloud Monitoring time series."
  type        = bool
  default     = false
}
