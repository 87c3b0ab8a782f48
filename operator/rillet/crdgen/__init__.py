"""Generation of the API's artefacts from its models: structural CRDs and the API reference.

Pure code (`structuring`, `building`, `documenting`) turns models into documents; `generating`
renders them as text and holds the only functions that write files. It imports only `api`;
`cli` (`rillet crds generate`) and tests import it, and `reconcile` may.
"""
