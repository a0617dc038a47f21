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
