from django.db import models


class EchoWord(models.Model):
    """One word an echo run echoed: the kind's own table."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="echo_words")
    index = models.PositiveIntegerField()
    word = models.CharField(max_length=200)

    class Meta:
        ordering = ["run", "index"]

    def __str__(self) -> str:
        return f"{self.index}: {self.word}"
