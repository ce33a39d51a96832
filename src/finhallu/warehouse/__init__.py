from finhallu.warehouse.catalog import Catalog, connect_readonly
from finhallu.warehouse.store import TableRef, TableStore, content_hash

__all__ = ["Catalog", "TableRef", "TableStore", "connect_readonly", "content_hash"]
