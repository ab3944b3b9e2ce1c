"""Instruct-FD's scores from its verdicts: IAS and delta-IAS (`ias`), the result tables with
intervals and tests (`tables`), and judge validation against human labels (`validation`)."""
