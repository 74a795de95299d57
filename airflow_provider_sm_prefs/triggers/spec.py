"""One frozen spec per trigger: its arguments declared, typed, converted and documented in one place.

Airflow stores a deferred trigger as ``serialize()``'s keyword arguments and rebuilds it elsewhere (another
triggerer, after a restart, after an upgrade) with ``cls(**kwargs)``. A :class:`SpecTrigger` writes its
spec's fields (:meth:`TriggerSpec.as_kwargs`) and reads them back into the same spec
(:meth:`TriggerSpec.from_kwargs`), so an argument is one field: declared once, serialized, rebuilt and
converted by the same code. The field names are the keyword arguments of earlier releases: a row of the
``trigger`` table written by one of them rebuilds the same spec (an argument renamed since is read through
:attr:`TriggerSpec.renamed`).

The four connection settings travel as one :class:`~airflow_provider_sm_prefs.hooks.sagemaker.AwsSettings`
(the ``aws`` field), serialized flat under their usual names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Generic, TypeVar

from airflow.triggers.base import BaseTrigger

from airflow_provider_sm_prefs.hooks.sagemaker import AwsSettings

__all__ = ["AWS_FIELDS", "SpecTrigger", "TriggerSpec"]

#: The serialized names of the ``aws`` field's settings.
AWS_FIELDS = ("aws_conn_id", "region_name", "verify", "botocore_config")

S = TypeVar("S", bound="TriggerSpec")
T = TypeVar("T", bound="SpecTrigger[Any]")


@dataclass(frozen=True)
class TriggerSpec:
    """Base of a trigger's spec: a frozen dataclass whose fields are the trigger's arguments.

    A subclass declares its fields and converts their serialized values (JSON gives a float as an int, a
    tuple as a list) in ``__post_init__``; every spec has :attr:`aws`.
    """

    #: How the trigger reaches SageMaker (keyword only, so that a subclass's fields need no defaults).
    aws: AwsSettings = field(default_factory=AwsSettings, kw_only=True)

    #: Arguments renamed since an earlier release, old name → new: a row that release wrote carries the old.
    renamed: ClassVar[Mapping[str, str]] = {}
    #: The arguments a caller may pass by position, in order (as earlier releases' signatures allowed).
    positional: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_kwargs(cls: type[S], args: tuple[Any, ...], kwargs: Mapping[str, Any], owner: str) -> S:
        """The spec of a trigger's constructor arguments (``owner``, the trigger's name, for errors)."""
        values = dict(kwargs)
        if len(args) > len(cls.positional):
            raise TypeError(f"{owner} takes at most {len(cls.positional)} positional argument(s)")
        for name, value in zip(cls.positional, args, strict=False):
            if name in values:
                raise TypeError(f"{owner}: {name} given by position and by name")
            values[name] = value
        for old, new in cls.renamed.items():
            if old not in values:
                continue
            value = values.pop(old)
            if value is None:
                continue
            if values.get(new) is not None:
                raise TypeError(f"{owner}: pass {new} only ({old} is its earlier name), not both")
            values[new] = value
        aws = AwsSettings(**{name: values.pop(name) for name in AWS_FIELDS if name in values})
        known = {spec_field.name for spec_field in fields(cls)} - {"aws"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TypeError(f"{owner} got unexpected argument(s): {', '.join(unknown)}")
        values["aws"] = aws
        return cls(**values)

    def as_kwargs(self) -> dict[str, Any]:
        """The trigger's serialized arguments: every field under its name, the settings flat."""
        kwargs = {spec_field.name: getattr(self, spec_field.name) for spec_field in fields(self)}
        aws: AwsSettings = kwargs.pop("aws")
        kwargs.update({name: getattr(aws, name) for name in AWS_FIELDS})
        return kwargs


class SpecTrigger(BaseTrigger, Generic[S]):
    """A trigger whose arguments are its :attr:`spec`: serialized from it, rebuilt into it.

    Build one from a spec with :meth:`of`; ``cls(**kwargs)`` (Airflow's way, and the keyword arguments of
    earlier releases) builds the same spec.
    """

    spec_type: ClassVar[type[TriggerSpec]]
    spec: S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.spec = self.spec_type.from_kwargs(args, kwargs, type(self).__name__)  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        # Read-only access to the spec under the names earlier releases' triggers had as attributes
        # (``trigger.job_name``, ``trigger.kind``): called only when nothing else has the name.
        if name != "spec" and "spec" in self.__dict__ and not name.startswith("_"):
            spec = self.__dict__["spec"]
            if hasattr(spec, name):
                return getattr(spec, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        # An argument set on the trigger would be neither used nor serialized: it lives in the spec.
        if name in {spec_field.name for spec_field in fields(self.spec_type)}:
            raise AttributeError(
                f"{type(self).__name__}.{name} is an argument of its spec: build the trigger with it "
                f"({type(self).__name__}.of(dataclasses.replace(trigger.spec, {name}=...)))"
            )
        super().__setattr__(name, value)

    @classmethod
    def of(cls: type[T], spec: TriggerSpec) -> T:
        """The trigger of ``spec``."""
        return cls(**spec.as_kwargs())

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", self.spec.as_kwargs()

    @property
    def settings(self) -> AwsSettings:
        """How this trigger reaches SageMaker."""
        return self.spec.aws
