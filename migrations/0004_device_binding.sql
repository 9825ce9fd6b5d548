ALTER TABLE `sessions` ADD `dbsc_challenge` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `dbsc_key_thumbprint` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `bound_cookie_hash` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `bound_cookie_expires_at` integer;--> statement-breakpoint
ALTER TABLE `sessions` ADD `previous_bound_cookie_hash` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `previous_bound_cookie_expires_at` integer;