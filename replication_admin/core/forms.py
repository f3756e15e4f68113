"""Form pieces every feature's pages share."""

from __future__ import annotations

from django import forms


class ScheduleForm(forms.Form):
    every_minutes = forms.IntegerField(required=False, min_value=1, max_value=525600, label="Refresh every (minutes)")
