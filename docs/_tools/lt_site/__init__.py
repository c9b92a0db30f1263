"""The site's own machinery: what the pages are built with, kept out of the package a reader imports.

``literate_transformer`` is the lesson; this is the workshop around it,
imported by ``docs/conf.py``, the extensions in ``docs/_ext``, the executed
chapters' hidden cells and the tests:

* :mod:`lt_site.trace` records, line by line, what the package's code
  computed, and :mod:`lt_site.examples` runs the examples it records: the
  runtime values beside the annotated source;
* :mod:`lt_site.proofs` measures each module against the reference it
  equals: the proof badges;
* :mod:`lt_site.export` exports BERT to ONNX for the page that runs it in
  the reader's browser, and :mod:`lt_site.export_decoder` the trained
  decoder, its weights in the GGUF file's blocks, for the prompt page;
* :mod:`lt_site.environment` names the versions and the device a page was
  computed with;
* :mod:`lt_site.digest` is the one digest of the package's source that
  every cache of the site is keyed on.
"""
