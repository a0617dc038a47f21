# Who hears how a run ended: the topic the runs' exit handlers publish to (notify.pubsub_topic), and, as a
# backstop for a run whose exit handler never ran (a cancel, a lost node), an alert on failed pipeline jobs
# in the logs. docs/retraining.md, "Notifications".

resource "google_pubsub_topic" "pipeline_runs" {
  name                       = "${var.name}-pipeline-runs"
  message_retention_duration = "604800s"
  depends_on                 = [google_project_service.apis]
  #checkov:skip=CKV_GCP_83:Run outcomes carry no secrets (state, task, version, metric); Google-managed keys suffice.
}

# Only the pipeline's steps publish (its exit handler); nobody else may write to the topic.
resource "google_pubsub_topic_iam_member" "pipeline_publishes" {
  topic      = google_pubsub_topic.pipeline_runs.id
  role       = "roles/pubsub.publisher"
  member     = "serviceAccount:${google_service_account.pipeline.email}"
  depends_on = [google_project_service.apis]
}

resource "google_monitoring_notification_channel" "email" {
  count        = var.alert_email == "" ? 0 : 1
  display_name = "${var.name} pipeline failures"
  type         = "email"
  labels = {
    email_address = var.alert_email
  }
  depends_on = [google_project_service.apis]
}

# A log-based alert: every error Vertex AI Pipelines logs for a job of this project (the PipelineJob
# monitored resource), at most one notification per hour. Not checked against a real project here.
resource "google_monitoring_alert_policy" "failed_pipeline_jobs" {
  display_name = "${var.name}: a pipeline job failed"
  combiner     = "OR"
  conditions {
    display_name = "PipelineJob error in the logs"
    condition_matched_log {
      filter = "resource.type=\"aiplatform.googleapis.com/PipelineJob\" AND severity>=ERROR"
    }
  }
  alert_strategy {
    notification_rate_limit {
      period = "3600s"
    }
    auto_close = "86400s"
  }
  notification_channels = google_monitoring_notification_channel.email[*].id
  documentation {
    content   = "A Vertex AI pipeline job of ${var.name} logged an error; its own notification (Pub/Sub topic ${google_pubsub_topic.pipeline_runs.name}) may be missing if its exit handler did not run."
    mime_type = "text/markdown"
  }
  depends_on = [google_project_service.apis]
}
