from django.apps import AppConfig


class MlflowConfig(AppConfig):
    name = "npulab.mlflow"
    label = "mlflow_api"
    verbose_name = "MLflow tracking API"
