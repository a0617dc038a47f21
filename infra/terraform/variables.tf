variable "project_id" {
  description = "The GCP project that hosts the pipeline."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a valid GCP project id."
  }
}

variable "region" {
  description = "Region for Vertex AI, Dataflow, the bucket and Artifact Registry (TPU v5e training: us-central1, europe-west4, ...)."
  type        = string
  default     = "us-central1"
}

variable "name" {
  description = "Prefix for every resource; matches pipeline.name in configs/vertex.yaml."
  type        = string
  default     = "penguin"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,20}$", var.name))
    error_message = "name must be 2-21 lower-case letters, digits or '-', starting with a letter."
  }
}

variable "deployers" {
  description = "Principals (e.g. user:alice@example.com, group:ml@example.com) allowed to submit and schedule runs as the pipeline service account."
  type        = list(string)
  default     = []
}

variable "noncurrent_version_retention_days" {
  description = "Days to keep overwritten or deleted object versions in the pipeline bucket."
  type        = number
  default     = 30
}

variable "dataflow_subnet_cidr" {
  description = "Private IP range of the Dataflow workers' subnetwork (one address per worker VM)."
  type        = string
  default     = "10.128.64.0/20"
  validation {
    condition     = can(cidrnetmask(var.dataflow_subnet_cidr))
    error_message = "dataflow_subnet_cidr must be an IPv4 CIDR range such as 10.128.64.0/20."
  }
}

variable "alert_email" {
  description = "Email address the failed-pipeline-job alert notifies; empty: the alert fires without a channel."
  type        = string
  default     = ""
}
