# The Dataflow workers' network. The pipeline starts them without public IPs
# (dataflow.use_public_ips: false), so they reach Cloud Storage, Artifact
# Registry and Google APIs only through Private Google Access, which the default
# network's subnets have off; and workers of one job exchange data over TCP
# 12345-12346, which no default rule opens (Dataflow docs, "Configure internet
# access and firewall rules"). configs/vertex.yaml names this subnetwork
# (dataflow.subnetwork, output dataflow_subnetwork).

resource "google_compute_network" "dataflow" {
  name                    = "${var.name}-dataflow"
  description             = "Dataflow workers of the ${var.name} pipeline."
  auto_create_subnetworks = false
  routing_mode            = "REGIONAL"
  depends_on              = [google_project_service.apis]
}

resource "google_compute_subnetwork" "dataflow" {
  name                     = "${var.name}-dataflow"
  region                   = var.region
  network                  = google_compute_network.dataflow.id
  ip_cidr_range            = var.dataflow_subnet_cidr
  private_ip_google_access = true
  log_config {
    aggregation_interval = "INTERVAL_10_MIN"
    flow_sampling        = 0.5
    metadata             = "INCLUDE_ALL_METADATA"
  }
  depends_on = [google_project_service.apis]
}

# Dataflow gives every worker VM the network tag `dataflow`; the rule admits
# only workers, only on the ports they use between each other.
resource "google_compute_firewall" "dataflow_workers" {
  name        = "${var.name}-dataflow-workers"
  description = "Dataflow workers exchange shuffle and streaming data with each other."
  network     = google_compute_network.dataflow.name
  direction   = "INGRESS"
  priority    = 1000
  source_tags = ["dataflow"]
  target_tags = ["dataflow"]
  allow {
    protocol = "tcp"
    ports    = ["12345-12346"]
  }
  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
  depends_on = [google_project_service.apis]
}
