"""The output layer: text and JSON documents, their schemas, the HTML report, plots, launch-config
exporters and file writing."""
