output "google_service_account" {
  description = "Put it in serviceaccount.yaml's iam.gke.io/gcp-service-account annotation."
  value       = google_service_account.kfp_pipeline.email
}

output "kubernetes_service_account" {
  description = "kubeflow.service_account in configs/kubeflow.yaml."
  value       = "${var.namespace}/${var.kubernetes_service_account}"
}
