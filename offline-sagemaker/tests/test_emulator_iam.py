"""IAM SimulatePrincipalPolicy at the offline SageMaker (the SDK's role check); the rest of IAM is moto's."""

from __future__ import annotations

import json

from offline_sagemaker import OfflineSageMaker

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def test_simulate_principal_policy_answers_in_aws_shape_allowed_unless_the_scenario_denies(
    load_frozen: object,
) -> None:
    world: OfflineSageMaker = load_frozen(iam_denied_actions=["s3:PutObject"])  # type: ignore[operator]
    iam = world.boto3_client("iam")
    result = iam.simulate_principal_policy(
        PolicySourceArn=ROLE,
        ActionNames=["s3:GetObject", "s3:PutObject"],
        ResourceArns=["arn:aws:s3:::bucket/*"],
    )
    assert result["IsTruncated"] is False
    assert [
        (r["EvalActionName"], r["EvalResourceName"], r["EvalDecision"]) for r in result["EvaluationResults"]
    ] == [
        ("s3:GetObject", "arn:aws:s3:::bucket/*", "allowed"),
        ("s3:PutObject", "arn:aws:s3:::bucket/*", "implicitDeny"),
    ]
    # Every other IAM call still reaches moto, body intact.
    trust = {"Version": "2012-10-17", "Statement": []}
    iam.create_role(RoleName="EmulatorIamCheck", AssumeRolePolicyDocument=json.dumps(trust))
    assert iam.get_role(RoleName="EmulatorIamCheck")["Role"]["RoleName"] == "EmulatorIamCheck"
    iam.delete_role(RoleName="EmulatorIamCheck")


def test_simulate_custom_policy_evaluates_conditions_and_an_explicit_deny_as_aws_does(
    load_frozen: object,
) -> None:
    """Request tags, a missing key (false), a resource policy's Deny over an identity policy's Allow."""
    world: OfflineSageMaker = load_frozen()  # type: ignore[operator]
    iam = world.boto3_client("iam")
    job = "arn:aws:sagemaker:us-east-1:123456789012:training-job/j"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "sagemaker:StopTrainingJob",
                "Resource": job,
                "Condition": {"StringEquals": {"aws:ResourceTag/owner": "us"}},
            },
            {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"},
        ],
    }

    def decision(action: str, resource: str, context: list[dict[str, object]], **extra: object) -> str:
        answer = iam.simulate_custom_policy(
            PolicyInputList=[json.dumps(policy)],
            ActionNames=[action],
            ResourceArns=[resource],
            ContextEntries=context,
            **extra,
        )
        return str(answer["EvaluationResults"][0]["EvalDecision"])

    tag = {"ContextKeyName": "aws:ResourceTag/owner", "ContextKeyType": "string"}
    assert decision("sagemaker:StopTrainingJob", job, [{**tag, "ContextKeyValues": ["us"]}]) == "allowed"
    assert (
        decision("sagemaker:StopTrainingJob", job, [{**tag, "ContextKeyValues": ["them"]}]) == "implicitDeny"
    )
    assert decision("sagemaker:StopTrainingJob", job, []) == "implicitDeny"
    queue = "arn:aws:sqs:us-east-1:123456789012:q"
    deny = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:SendMessage",
                "Resource": queue,
                "Condition": {
                    "ArnNotEquals": {"aws:SourceArn": "arn:aws:events:us-east-1:123456789012:rule/r"}
                },
            }
        ],
    }
    assert decision("sqs:SendMessage", queue, []) == "allowed"
    caller = "arn:aws:iam::123456789012:role/any"
    assert (
        decision("sqs:SendMessage", queue, [], ResourcePolicy=json.dumps(deny), CallerArn=caller)
        == "explicitDeny"
    )
