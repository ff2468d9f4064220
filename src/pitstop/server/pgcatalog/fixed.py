"""The ``pg_catalog`` relations whose rows never change: a few constant tables (``pg_database``,
``pg_am``, ``pg_collation``, ``pg_tablespace``, ``pg_extension``), and the many that are always
empty in pitstop (it has no functions, sequences, triggers, policies...), declared by their
columns so that clients' joins and filters on them bind.
"""

from __future__ import annotations

from pitstop.server.pgcatalog.oids import DATABASE, PG_CATALOG_OID, stable_oid
from pitstop.server.pgcatalog.relation import CatalogView, empty, values

_PG_DATABASE = values(
    [
        (stable_oid(f"database:{DATABASE}"), DATABASE, 10, 6, "c", False, True, -1, 0, 1, 1663, "C", "C")
        + (None, None, None)
    ],
    (
        ("oid", "OID"), ("datname", "VARCHAR"), ("datdba", "OID"), ("encoding", "INTEGER"),
        ("datlocprovider", "VARCHAR"), ("datistemplate", "BOOLEAN"), ("datallowconn", "BOOLEAN"),
        ("datconnlimit", "INTEGER"), ("datfrozenxid", "BIGINT"), ("datminmxid", "BIGINT"),
        ("dattablespace", "OID"), ("datcollate", "VARCHAR"), ("datctype", "VARCHAR"),
        ("daticulocale", "VARCHAR"), ("datcollversion", "VARCHAR"), ("datacl", "VARCHAR[]"),
    ),
)  # fmt: skip


VIEWS: dict[tuple[str, str], CatalogView] = {
    ("pg_catalog", "pg_database"): CatalogView("pgc_pg_database", _PG_DATABASE),
    ("pg_catalog", "pg_matviews"): CatalogView(
        "pgc_pg_matviews",
        empty("schemaname VARCHAR", "matviewname VARCHAR", "matviewowner VARCHAR", "tablespace VARCHAR",
              "hasindexes BOOLEAN", "ispopulated BOOLEAN", "definition VARCHAR"),
    ),
    ("pg_catalog", "pg_am"): CatalogView(
        "pgc_pg_am",
        values(
            [(2, "heap", "heap_tableam_handler", "t"), (403, "btree", "bthandler", "i"),
             (405, "hash", "hashhandler", "i"), (783, "gist", "gisthandler", "i"),
             (2742, "gin", "ginhandler", "i"), (4000, "spgist", "spghandler", "i"),
             (3580, "brin", "brinhandler", "i")],
            (("oid", "OID"), ("amname", "VARCHAR"), ("amhandler", "VARCHAR"), ("amtype", "VARCHAR")),
        ),
    ),
    ("pg_catalog", "pg_collation"): CatalogView(
        "pgc_pg_collation",
        values(
            [(100, "default", 11, 10, "d", True, -1, None, None, None, None),
             (950, "C", 11, 10, "c", True, -1, "C", "C", None, None),
             (951, "POSIX", 11, 10, "c", True, -1, "POSIX", "POSIX", None, None)],
            (("oid", "OID"), ("collname", "VARCHAR"), ("collnamespace", "OID"), ("collowner", "OID"),
             ("collprovider", "VARCHAR"), ("collisdeterministic", "BOOLEAN"), ("collencoding", "INTEGER"),
             ("collcollate", "VARCHAR"), ("collctype", "VARCHAR"), ("colliculocale", "VARCHAR"),
             ("collversion", "VARCHAR")),
        ),
    ),
    ("pg_catalog", "pg_tablespace"): CatalogView(
        "pgc_pg_tablespace",
        values(
            [(1663, "pg_default", 10, None, None), (1664, "pg_global", 10, None, None)],
            (("oid", "OID"), ("spcname", "VARCHAR"), ("spcowner", "OID"), ("spcacl", "VARCHAR[]"),
             ("spcoptions", "VARCHAR[]")),
        ),
    ),
    ("pg_catalog", "pg_extension"): CatalogView(
        "pgc_pg_extension",
        values(
            [(stable_oid("extension:plpgsql"), "plpgsql", 10, PG_CATALOG_OID, False, "1.0", None, None)],
            (("oid", "OID"), ("extname", "VARCHAR"), ("extowner", "OID"), ("extnamespace", "OID"),
             ("extrelocatable", "BOOLEAN"), ("extversion", "VARCHAR"), ("extconfig", "OID[]"),
             ("extcondition", "VARCHAR[]")),
        ),
    ),
    ("pg_catalog", "pg_proc"): CatalogView(
        "pgc_pg_proc",
        empty("oid OID", "proname VARCHAR", "pronamespace OID", "proowner OID", "prolang OID",
              "procost FLOAT", "prorows FLOAT", "provariadic OID", "prosupport VARCHAR",
              "prokind VARCHAR", "prosecdef BOOLEAN", "proleakproof BOOLEAN", "proisstrict BOOLEAN",
              "proretset BOOLEAN", "provolatile VARCHAR", "proparallel VARCHAR", "pronargs SMALLINT",
              "pronargdefaults SMALLINT", "prorettype OID", "proargtypes OID[]",
              "proallargtypes OID[]", "proargmodes VARCHAR[]", "proargnames VARCHAR[]",
              "proargdefaults VARCHAR", "protrftypes OID[]", "prosrc VARCHAR", "probin VARCHAR",
              "prosqlbody VARCHAR", "proconfig VARCHAR[]", "proacl VARCHAR[]"),
    ),
    ("pg_catalog", "pg_inherits"): CatalogView(
        "pgc_pg_inherits",
        empty("inhrelid OID", "inhparent OID", "inhseqno INTEGER", "inhdetachpending BOOLEAN"),
    ),
    ("pg_catalog", "pg_range"): CatalogView(
        "pgc_pg_range",
        empty("rngtypid OID", "rngsubtype OID", "rngmultitypid OID", "rngcollation OID",
              "rngsubopc OID", "rngcanonical VARCHAR", "rngsubdiff VARCHAR"),
    ),
    ("pg_catalog", "pg_enum"): CatalogView(
        "pgc_pg_enum", empty("oid OID", "enumtypid OID", "enumsortorder FLOAT", "enumlabel VARCHAR")
    ),
    ("pg_catalog", "pg_policy"): CatalogView(
        "pgc_pg_policy",
        empty("oid OID", "polname VARCHAR", "polrelid OID", "polcmd VARCHAR", "polpermissive BOOLEAN",
              "polroles OID[]", "polqual VARCHAR", "polwithcheck VARCHAR"),
    ),
    ("pg_catalog", "pg_statistic_ext"): CatalogView(
        "pgc_pg_statistic_ext",
        empty("oid OID", "stxrelid OID", "stxname VARCHAR", "stxnamespace OID", "stxowner OID",
              "stxstattarget INTEGER", "stxkeys SMALLINT[]", "stxkind VARCHAR[]", "stxexprs VARCHAR"),
    ),
    ("pg_catalog", "pg_publication"): CatalogView(
        "pgc_pg_publication",
        empty("oid OID", "pubname VARCHAR", "pubowner OID", "puballtables BOOLEAN",
              "pubinsert BOOLEAN",
              "pubupdate BOOLEAN", "pubdelete BOOLEAN", "pubtruncate BOOLEAN", "pubviaroot BOOLEAN"),
    ),
    ("pg_catalog", "pg_publication_rel"): CatalogView(
        "pgc_pg_publication_rel",
        empty("oid OID", "prpubid OID", "prrelid OID", "prqual VARCHAR", "prattrs SMALLINT[]"),
    ),
    ("pg_catalog", "pg_publication_namespace"): CatalogView(
        "pgc_pg_publication_namespace", empty("oid OID", "pnpubid OID", "pnnspid OID")
    ),
    ("pg_catalog", "pg_sequence"): CatalogView(
        "pgc_pg_sequence",
        empty("seqrelid OID", "seqtypid OID", "seqstart BIGINT", "seqincrement BIGINT",
              "seqmax BIGINT",
              "seqmin BIGINT", "seqcache BIGINT", "seqcycle BOOLEAN"),
    ),
    ("pg_catalog", "pg_foreign_table"): CatalogView(
        "pgc_pg_foreign_table", empty("ftrelid OID", "ftserver OID", "ftoptions VARCHAR[]")
    ),
    ("pg_catalog", "pg_partitioned_table"): CatalogView(
        "pgc_pg_partitioned_table",
        empty("partrelid OID", "partstrat VARCHAR", "partnatts SMALLINT", "partdefid OID",
              "partattrs SMALLINT[]", "partclass OID[]", "partcollation OID[]", "partexprs VARCHAR"),
    ),
    ("pg_catalog", "pg_depend"): CatalogView(
        "pgc_pg_depend",
        empty("classid OID", "objid OID", "objsubid INTEGER", "refclassid OID", "refobjid OID",
              "refobjsubid INTEGER", "deptype VARCHAR"),
    ),
    ("pg_catalog", "pg_trigger"): CatalogView(
        "pgc_pg_trigger",
        empty("oid OID", "tgrelid OID", "tgparentid OID", "tgname VARCHAR", "tgfoid OID",
              "tgtype SMALLINT", "tgenabled VARCHAR", "tgisinternal BOOLEAN", "tgconstrrelid OID",
              "tgconstrindid OID", "tgconstraint OID", "tgdeferrable BOOLEAN",
              "tginitdeferred BOOLEAN", "tgnargs SMALLINT", "tgattr SMALLINT[]", "tgargs BLOB",
              "tgqual VARCHAR", "tgoldtable VARCHAR", "tgnewtable VARCHAR"),
    ),
    ("pg_catalog", "pg_rewrite"): CatalogView(
        "pgc_pg_rewrite",
        empty("oid OID", "rulename VARCHAR", "ev_class OID", "ev_type VARCHAR", "ev_enabled VARCHAR",
              "is_instead BOOLEAN", "ev_qual VARCHAR", "ev_action VARCHAR"),
    ),
    ("pg_catalog", "pg_opclass"): CatalogView(
        "pgc_pg_opclass",
        empty("oid OID", "opcmethod OID", "opcname VARCHAR", "opcnamespace OID", "opcowner OID",
              "opcfamily OID", "opcintype OID", "opcdefault BOOLEAN", "opckeytype OID"),
    ),
    ("pg_catalog", "pg_shdescription"): CatalogView(
        "pgc_pg_shdescription", empty("objoid OID", "classoid OID", "description VARCHAR")
    ),
    ("pg_catalog", "pg_auth_members"): CatalogView(
        "pgc_pg_auth_members",
        empty("oid OID", "roleid OID", "member OID", "grantor OID", "admin_option BOOLEAN"),
    ),
    ("pg_catalog", "pg_cast"): CatalogView(
        "pgc_pg_cast",
        empty("oid OID", "castsource OID", "casttarget OID", "castfunc OID",
              "castcontext VARCHAR", "castmethod VARCHAR"),
    ),  # fmt: skip
    ("pg_catalog", "pg_operator"): CatalogView(
        "pgc_pg_operator",
        empty("oid OID", "oprname VARCHAR", "oprnamespace OID", "oprowner OID", "oprkind VARCHAR",
              "oprcanmerge BOOLEAN", "oprcanhash BOOLEAN", "oprleft OID", "oprright OID",
              "oprresult OID", "oprcom OID", "oprnegate OID", "oprcode VARCHAR"),
    ),  # fmt: skip
    ("pg_catalog", "pg_conversion"): CatalogView(
        "pgc_pg_conversion",
        empty("oid OID", "conname VARCHAR", "connamespace OID", "conowner OID",
              "conforencoding INTEGER", "contoencoding INTEGER", "conproc VARCHAR", "condefault BOOLEAN"),
    ),  # fmt: skip
    ("pg_catalog", "pg_event_trigger"): CatalogView(
        "pgc_pg_event_trigger",
        empty("oid OID", "evtname VARCHAR", "evtevent VARCHAR", "evtowner OID", "evtfoid OID",
              "evtenabled VARCHAR", "evttags VARCHAR[]"),
    ),  # fmt: skip
}  # fmt: skip
